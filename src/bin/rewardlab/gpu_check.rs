//! `rewardlab gpu-check` (hidden; run by `scripts/gpu-check.sh` on a GPU
//! machine): for every shipped reward file, evaluate synthetic rollouts on the
//! CPU and on the GPU and compare them within the documented tolerance
//! (`gpu::close`), then time the fused kernels against the unfused
//! one-kernel-per-operator baseline and a device-to-device copy of the same
//! bytes, and print one table.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use rewardlab_dsl::check::CheckOptions;
use rewardlab_dsl::cpu::CompiledProgram;
use rewardlab_dsl::gpu::{self, BenchReport, GpuProgram};
use rewardlab_dsl::{EvalOptions, FeatureSchema, FeatureTable, NonFinite, Outputs, Program};

use crate::common::load_reward_file;

#[derive(Debug, clap::Args)]
pub struct GpuCheckArgs {
    /// Rollouts per reward file.
    #[arg(long, default_value_t = 16_000_000)]
    rollouts: usize,
    /// Rollouts per group.
    #[arg(long, default_value_t = 8)]
    group_size: usize,
    /// Timed evaluations per backend (after one warm-up).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// The folder of reward files to check (every `*.reward` in it).
    #[arg(long, default_value = "rewards")]
    rewards: PathBuf,
}

/// One reward file's results.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    file: String,
    /// The largest `|gpu - cpu| / max(|cpu|, 1)` over all outputs and rows.
    max_err: f64,
    agree: bool,
    cpu_ms: f64,
    bench: BenchReport,
}

pub fn run(args: GpuCheckArgs) -> anyhow::Result<u8> {
    let schema = rewardlab_rewards::feature_schema();
    let files = reward_files(&args.rewards)?;
    let mut rows = Vec::new();
    for path in &files {
        let Some(loaded) = load_reward_file(path, &schema, &CheckOptions::default())? else {
            bail!("{} does not check", path.display());
        };
        let program = loaded.program;
        let table = synthetic_table(&program, &schema, args.rollouts, args.group_size)?;
        let options = EvalOptions { group_size: None, non_finite: NonFinite::Allow };
        let start = Instant::now();
        let want = CompiledProgram::new(&program).eval(&table, &options)?;
        let cpu_ms = start.elapsed().as_secs_f64() * 1e3;
        let gpu = GpuProgram::new(&program).context("gpu-check needs a GPU")?;
        let got = gpu.eval(&table, &options)?;
        let unfused = gpu.eval_unfused(&table, &options)?;
        let agree = gpu::first_mismatch(&got, &want).is_none() && gpu::first_mismatch(&unfused, &want).is_none();
        if let Some(m) = gpu::first_mismatch(&got, &want) {
            eprintln!("{}: {} differs at row {}: gpu {} vs cpu {}", path.display(), m.output, m.row, m.got, m.want);
        }
        let bench = gpu.bench(&table, args.reps)?;
        let file = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        rows.push(Row { file, max_err: max_error(&got, &want), agree, cpu_ms, bench });
    }
    print!("{}", format_table(&rows));
    Ok(if rows.iter().all(|r| r.agree) { 0 } else { 1 })
}

fn reward_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "reward"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no *.reward files in {}", dir.display());
    }
    Ok(files)
}

/// Groups of `group_size` rollouts with every feature the program reads:
/// values inside each feature's declared range (integers for counts), on a
/// grid of 1/64 so they are exact in `f32` and both backends see the same
/// inputs. Deterministic (a hash of the row and the key).
fn synthetic_table(
    program: &Program,
    schema: &FeatureSchema,
    rollouts: usize,
    group_size: usize,
) -> anyhow::Result<FeatureTable> {
    if group_size == 0 {
        bail!("--group-size must be at least 1");
    }
    let groups = rollouts.div_ceil(group_size);
    let mut table = FeatureTable::uniform(groups, group_size);
    for (k, f) in program.features.iter().enumerate() {
        let decl = schema.get(&f.name).with_context(|| format!("feature {} is not in the schema", f.name))?;
        let lo = decl.range.lo.max(-1e6);
        let hi = if decl.range.hi.is_finite() { decl.range.hi } else { lo + 64.0 };
        let salt = (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let column: Vec<f64> = (0..table.rows())
            .map(|i| {
                let h = ((i as u64).wrapping_add(salt)).wrapping_mul(0xff51_afd7_ed55_8ccd) >> 33;
                if decl.integer {
                    (lo.ceil() + (h % ((hi - lo).floor() as u64 + 1)) as f64).min(hi)
                } else {
                    lo + (hi - lo) * (h % 65) as f64 / 64.0
                }
            })
            .collect();
        table.add_column(f.key.clone(), column)?;
    }
    Ok(table)
}

fn max_error(got: &Outputs, want: &Outputs) -> f64 {
    let pairs = [(&got.reward, &want.reward), (&got.adv, &want.adv), (&got.advantage, &want.advantage)];
    let mut worst: f64 = 0.0;
    for (g, w) in pairs {
        for (&a, &b) in g.iter().zip(w) {
            if !(a == b || (a.is_nan() && b.is_nan())) {
                worst = worst.max((a - b).abs() / b.abs().max(1.0));
            }
        }
    }
    worst
}

fn format_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let device = rows.first().map(|r| r.bench.device.as_str()).unwrap_or("no device");
    let n = rows.first().map(|r| r.bench.rows).unwrap_or(0);
    writeln!(out, "device: {device}; {n} rollouts per file; tolerance {} of max(|cpu|, 1)", gpu::TOLERANCE).ok();
    writeln!(
        out,
        "{:<28} {:>6} {:>9} {:>9} {:>10} {:>11} {:>8} {:>10} {:>9} {:>8}",
        "file", "agree", "max err", "cpu ms", "fused ms", "unfused ms", "speedup", "fused GB/s", "copy GB/s", "of copy"
    )
    .ok();
    for r in rows {
        let b = &r.bench;
        writeln!(
            out,
            "{:<28} {:>6} {:>9.1e} {:>9.1} {:>10.3} {:>11.3} {:>7.1}x {:>10.0} {:>9.0} {:>7.0}%",
            r.file,
            if r.agree { "yes" } else { "NO" },
            r.max_err,
            r.cpu_ms,
            b.fused_ms,
            b.unfused_ms,
            b.unfused_ms / b.fused_ms,
            b.fused_gbps(),
            b.copy_gbps(),
            100.0 * b.fused_gbps() / b.copy_gbps(),
        )
        .ok();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rewardlab_dsl::SourceFile;
    use rewardlab_dsl::check::compile_source;

    fn program(text: &str) -> Program {
        let schema = rewardlab_rewards::feature_schema();
        compile_source(&SourceFile::new("t.reward", text), &schema, &CheckOptions::default()).expect("checks").0
    }

    #[test]
    fn synthetic_features_are_in_range_exact_in_f32_and_grouped() {
        let schema = rewardlab_rewards::feature_schema();
        let p = program("reward = Fb(file) * mask(c > 0) + len / 1000 + T\n");
        let t = synthetic_table(&p, &schema, 1001, 8).expect("a table");
        assert_eq!(t.groups(), 126);
        assert_eq!(t.rows(), 1008);
        for f in &p.features {
            let decl = schema.get(&f.name).expect("declared");
            let col = t.column(&f.key).expect("generated");
            let range = decl.range;
            assert!(col.iter().all(|&x| range.lo <= x && x <= range.hi), "{} out of range", f.key);
            assert!(col.iter().all(|&x| f64::from(x as f32) == x), "{} not exact in f32", f.key);
            if decl.integer {
                assert!(col.iter().all(|x| x.fract() == 0.0));
            }
            let distinct: std::collections::BTreeSet<u64> = col.iter().map(|x| x.to_bits()).collect();
            assert!(distinct.len() > 3, "{} is nearly constant", f.key);
        }
    }

    #[test]
    fn every_shipped_reward_file_gets_a_table_the_cpu_evaluates() {
        let schema = rewardlab_rewards::feature_schema();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rewards");
        let files = reward_files(&dir).expect("shipped files");
        assert!(files.len() >= 9);
        for path in files {
            let text = std::fs::read_to_string(&path).expect("readable");
            let p = program(&text);
            let t = synthetic_table(&p, &schema, 4000, 8).expect("a table");
            let options = EvalOptions { group_size: Some(8), non_finite: NonFinite::Allow };
            let out = CompiledProgram::new(&p).eval(&t, &options).expect("evaluates");
            assert_eq!(out.reward.len(), 4000, "{}", path.display());
        }
    }

    #[test]
    fn max_error_is_relative_above_one() {
        let want = Outputs { reward: vec![100.0, 0.0], adv: vec![0.0, 0.0], advantage: vec![f64::NAN, 1.0] };
        let got = Outputs { reward: vec![100.001, 0.0], adv: vec![0.0, 2e-6], advantage: vec![f64::NAN, 1.0] };
        assert!((max_error(&got, &want) - 1e-5).abs() < 1e-9);
    }

    #[test]
    fn the_table_lists_every_file() {
        let bench = BenchReport {
            device: "Test GPU (sm_90)".into(),
            rows: 16,
            fused_ms: 1.0,
            fused_launches: 4,
            unfused_ms: 4.0,
            unfused_launches: 20,
            copy_ms: 0.5,
            bytes: 4_000_000,
        };
        let row = Row { file: "grpo.reward".into(), max_err: 1e-7, agree: true, cpu_ms: 12.0, bench };
        expect_test::expect![[r#"
            device: Test GPU (sm_90); 16 rollouts per file; tolerance 0.00001 of max(|cpu|, 1)
            file                          agree   max err    cpu ms   fused ms  unfused ms  speedup fused GB/s copy GB/s  of copy
            grpo.reward                     yes    1.0e-7      12.0      1.000       4.000     4.0x          4         8      50%
        "#]]
        .assert_eq(&format_table(&[row]));
    }

    #[test]
    fn without_a_gpu_gpu_check_fails_with_a_clear_message() {
        let p = program("reward = Fb(file)\n");
        if let Err(e) = GpuProgram::new(&p) {
            let msg = e.to_string();
            assert!(msg.contains("--features cuda") || msg.contains("--device cpu"), "{msg}");
        }
    }
}
