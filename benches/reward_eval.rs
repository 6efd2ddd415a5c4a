//! Reward evaluation throughput: for each shipped formula (CodeGrep v1, v2,
//! v3 and FuseSearch F1·e), `reward`, `adv` and `advantage` over 1M rollouts
//! in groups of 8, single-threaded, three ways in one group:
//!
//! - `compiled`: the fused CPU backend (`CompiledProgram::eval`): the
//!   program's native kernel (built, or found in the kernel cache, by the
//!   agreement check's first evaluation; the bench says which backend ran);
//! - `hand_written`: a Rust loop written for that formula alone — one pass
//!   per group, the group's rewards on the stack, no allocation per row;
//! - `interpreter`: the tree-walking oracle;
//!
//! and the first two again evaluating into outputs kept from the previous
//! iteration (`compiled_into`: `CompiledProgram::eval_into` with one
//! `Workspace`; `hand_written_into`: the same loop writing into the same
//! `Outputs`). The pairs compare like with like: `compiled`/`hand_written`
//! both allocate three fresh 8 MB output columns per evaluation (the system
//! faults their pages in and unmaps them again, the same cost on both sides
//! and most of a cheap formula's time); the `_into` pair allocates nothing,
//! so its ratio is the kernels' own, which is what a caller evaluating many
//! tables (training steps, re-scoring runs) pays.
//!
//! Criterion's estimates of the two sides come from different seconds of the
//! run, and on a shared machine those differ by more than the kernels do. So
//! each formula also prints a paired ratio: the `_into` pair timed
//! alternately, one evaluation each per round (the order swapped every
//! round), writing into the same output buffers, and the median over the
//! rounds of hand-written time / compiled time, with its quartiles
//! (`paired_ratio`). A second paired ratio puts the kernel beside the same
//! loop dividing each row by `std + eps` as the language defines `adv`
//! (the first multiplies by the group's reciprocal, which can differ in the
//! last bit); that loop's outputs are asserted to be the kernel's bits. A
//! third pairs them on output columns whose starts lie about 1 KiB apart
//! modulo a page (`staggered_outputs`; each formula prints where its columns
//! start, mod 4096): a test for loads held up by stores 4 KiB away.
//!
//! A last group measures parse + check + compile of each reward file, and
//! one more the one-off build of each native kernel with an empty cache
//! (generating the C and running the C compiler), which the evaluation
//! groups never pay.
//! Every bench first checks that the compiled and hand-written values agree.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rewardlab_dsl::check::{CheckOptions, compile_source};
use rewardlab_dsl::cpu::{Backend, CompileOptions, CompiledProgram, NativeMode, Workspace};
use rewardlab_dsl::{EvalOptions, FeatureTable, Outputs, Program, SourceFile, interp};

const ROLLOUTS: usize = 1 << 20;
const GROUP: usize = 8;
const EPS: f64 = 1e-4;

/// Feature columns drawn in their declared ranges; some F-betas and `c`s repeat
/// within a group (ties, zero-spread groups and `c = 0` occur, as in training).
fn table() -> FeatureTable {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut t = FeatureTable::uniform(ROLLOUTS / GROUP, GROUP);
    let unit = |rng: &mut ChaCha8Rng| {
        if rng.random_range(0..3) == 0 { 0.0 } else { rng.random_range(0.0..=1.0) }
    };
    for key in ["Fb(file)", "Fb(lr)", "F1(file)", "F1(func)", "e"] {
        let values = (0..ROLLOUTS).map(|_| unit(&mut rng)).collect();
        t.add_column(key, values).expect("fresh column");
    }
    let c = (0..ROLLOUTS).map(|_| rng.random_range(0..=16) as f64 / 2.0).collect();
    t.add_column("c", c).expect("fresh column");
    t
}

fn compile(file: &str) -> Program {
    let path = format!("{}/rewards/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let source = SourceFile::new(file, text);
    match compile_source(&source, &rewardlab_rewards::feature_schema(), &CheckOptions::default()) {
        Ok((program, _warnings)) => program,
        Err(diags) => panic!("{file} does not check: {diags:?}"),
    }
}

/// Writes one group's GRPO `adv` (and the discounted `advantage`) from its rewards.
///
/// `DIVIDE = false` multiplies by the group's `1 / (std + eps)`: the loop a
/// Rust programmer writes, one division per group, whose values may differ
/// from the formula's in the last bit. `DIVIDE = true` divides each row by
/// `std + eps` as the reward language defines `adv` (and as the compiled
/// program must, to give the interpreter's and the GPU's bits): the same
/// operations as the formula, so the pair compares code, not arithmetic.
#[inline(always)]
fn grpo_group<const DIVIDE: bool>(
    r: &[f64; GROUP],
    discount: impl Fn(usize) -> f64,
    adv: &mut [f64],
    advantage: &mut [f64],
) {
    let mean = r.iter().sum::<f64>() / GROUP as f64;
    let var = r.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / GROUP as f64;
    let sd = var.sqrt() + EPS;
    let scale = 1.0 / sd;
    for i in 0..GROUP {
        let a = if DIVIDE { (r[i] - mean) / sd } else { (r[i] - mean) * scale };
        adv[i] = a;
        advantage[i] = a * discount(i);
    }
}

/// `column` sized to `n` values, kept when large enough, else a fresh zeroed
/// allocation: what `eval_into` does with its buffers.
fn sized(column: &mut Vec<f64>, n: usize) {
    if column.capacity() < n {
        *column = vec![0.0; n];
    } else {
        column.truncate(n);
        column.resize(n, 0.0);
    }
}

/// The baseline loop shared by the formulas, into `out`: `reward_of(row)`,
/// GRPO, and a per-row advantage discount.
#[inline(always)]
fn hand_loop<const DIVIDE: bool>(
    n: usize,
    reward_of: impl Fn(usize) -> f64,
    discount: impl Fn(usize) -> f64,
    out: &mut Outputs,
) {
    for column in [&mut out.reward, &mut out.adv, &mut out.advantage] {
        sized(column, n);
    }
    let groups = out
        .reward
        .chunks_exact_mut(GROUP)
        .zip(out.adv.chunks_exact_mut(GROUP))
        .zip(out.advantage.chunks_exact_mut(GROUP));
    for (g, ((reward, adv), advantage)) in groups.enumerate() {
        let base = g * GROUP;
        let r: [f64; GROUP] = std::array::from_fn(|i| reward_of(base + i));
        reward.copy_from_slice(&r);
        grpo_group::<DIVIDE>(&r, |i| discount(base + i), adv, advantage);
    }
}

fn col<'t>(t: &'t FeatureTable, key: &str) -> &'t [f64] {
    t.column(key).unwrap_or_else(|| panic!("bench table has `{key}`"))
}

fn codegrep_v1<const DIVIDE: bool>(t: &FeatureTable, out: &mut Outputs) {
    let (fbf, fbl, c) = (col(t, "Fb(file)"), col(t, "Fb(lr)"), col(t, "c"));
    hand_loop::<DIVIDE>(t.rows(), |i| (fbf[i] + fbl[i]) / 2.0 / f64::max(1.0, c[i] / 4.0), |_| 1.0, out)
}

fn codegrep_v2<const DIVIDE: bool>(t: &FeatureTable, out: &mut Outputs) {
    let (fbf, fbl, c) = (col(t, "Fb(file)"), col(t, "Fb(lr)"), col(t, "c"));
    hand_loop::<DIVIDE>(
        t.rows(),
        |i| {
            if c[i] > 0.0 { (fbf[i] + fbl[i]) / 2.0 } else { 0.0 }
        },
        |i| f64::min(c[i] / 4.0, 1.0).sqrt(),
        out,
    )
}

fn codegrep_v3<const DIVIDE: bool>(t: &FeatureTable, out: &mut Outputs) {
    let (fbf, c) = (col(t, "Fb(file)"), col(t, "c"));
    hand_loop::<DIVIDE>(t.rows(), |i| if c[i] > 0.0 { fbf[i] } else { 0.0 }, |i| f64::min(c[i] / 4.0, 1.0).sqrt(), out)
}

fn fusesearch_f1_times_e<const DIVIDE: bool>(t: &FeatureTable, out: &mut Outputs) {
    let (f1f, f1g, e) = (col(t, "F1(file)"), col(t, "F1(func)"), col(t, "e"));
    let (w, alpha, gamma) = (0.5, 1.0, 0.5);
    hand_loop::<DIVIDE>(
        t.rows(),
        |i| {
            let f1 = w * f1f[i] + (1.0 - w) * f1g[i];
            alpha * f1 + gamma * (f1 * e[i])
        },
        |_| 1.0,
        out,
    )
}

type HandWritten = fn(&FeatureTable, &mut Outputs);

/// Each formula with its hand-written loop, multiplying by the group's reciprocal, and the same
/// loop dividing each row as the formula does.
const FORMULAS: [(&str, &str, HandWritten, HandWritten); 4] = [
    ("codegrep_v1", "codegrep_v1.reward", codegrep_v1::<false>, codegrep_v1::<true>),
    ("codegrep_v2", "codegrep_v2.reward", codegrep_v2::<false>, codegrep_v2::<true>),
    ("codegrep_v3", "codegrep_v3.reward", codegrep_v3::<false>, codegrep_v3::<true>),
    (
        "fusesearch_f1_times_e",
        "fusesearch_f1_times_e.reward",
        fusesearch_f1_times_e::<false>,
        fusesearch_f1_times_e::<true>,
    ),
];

fn assert_close(name: &str, a: &Outputs, b: &Outputs) {
    for (what, x, y) in
        [("reward", &a.reward, &b.reward), ("adv", &a.adv, &b.adv), ("advantage", &a.advantage, &b.advantage)]
    {
        for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
            assert!((p - q).abs() <= 1e-9 * (1.0 + q.abs()), "{name}: {what}[{i}] compiled {p} vs hand-written {q}");
        }
    }
}

/// Rounds of the paired measurement (after as many warm-up rounds again).
const PAIRED_ROUNDS: usize = 201;

/// Times `compiled` and `hand` alternately on the same `outputs`, once each per
/// round, the first of the two swapped every round, and prints the median and quartiles of the
/// rounds' ratios hand / compiled (above 1: the compiled program is faster).
/// Both sides see the same moments of the machine, so the ratio stays put
/// where the two times move.
fn paired_ratio(
    name: &str,
    baseline: &str,
    outputs: &mut Outputs,
    mut compiled: impl FnMut(&mut Outputs),
    mut hand: impl FnMut(&mut Outputs),
) {
    let mut time = |f: &mut dyn FnMut(&mut Outputs)| {
        let start = std::time::Instant::now();
        f(outputs);
        start.elapsed().as_secs_f64()
    };
    let mut ratios = Vec::with_capacity(PAIRED_ROUNDS);
    let (mut compiled_s, mut hand_s) = (Vec::new(), Vec::new());
    for round in 0..2 * PAIRED_ROUNDS {
        let (c, h) = if round % 2 == 0 {
            let c = time(&mut compiled);
            (c, time(&mut hand))
        } else {
            let h = time(&mut hand);
            (time(&mut compiled), h)
        };
        if round >= PAIRED_ROUNDS {
            ratios.push(h / c);
            compiled_s.push(c);
            hand_s.push(h);
        }
    }
    let quantile = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q).round() as usize]
    };
    eprintln!(
        "reward_eval/{name}: paired ratio {baseline} / compiled, into reused buffers: median {:.2} \
         (quartiles {:.2}-{:.2}) over {PAIRED_ROUNDS} rounds; median times {:.2} ms compiled, {:.2} ms {baseline}",
        quantile(&mut ratios, 0.5),
        quantile(&mut ratios, 0.25),
        quantile(&mut ratios, 0.75),
        quantile(&mut compiled_s, 0.5) * 1e3,
        quantile(&mut hand_s, 0.5) * 1e3,
    );
}

/// Where each column the kernel reads or writes starts, modulo a 4 KiB page.
fn offsets(program: &Program, table: &FeatureTable, out: &Outputs) -> String {
    let at = |p: &[f64]| p.as_ptr() as usize % 4096;
    let mut parts: Vec<String> =
        program.features.iter().map(|f| format!("{} {}", f.key, at(col(table, &f.key)))).collect();
    parts.extend(
        [("reward", &out.reward), ("adv", &out.adv), ("advantage", &out.advantage)]
            .map(|(k, c)| format!("{k} {}", at(c))),
    );
    format!("column starts mod 4096: {}", parts.join(", "))
}

/// Output columns of `n` values whose allocations are each `136 * (k + 1)` values longer than
/// needed, so that (when the allocator places them one after another, as it does the plain
/// columns) their starts differ by about 1 KiB modulo a page; `eval_into` and the hand loop keep
/// an allocation that is large enough, so the starts stay put. Columns the allocator maps on pages
/// of their own (the process's first large allocations) start at 16 whatever their length, which
/// the printed offsets show.
fn staggered_outputs(n: usize) -> Outputs {
    let column = |k: usize| {
        let mut v = Vec::with_capacity(n + 136 * (k + 1));
        v.resize(n, 0.0);
        v
    };
    Outputs { reward: column(0), adv: column(1), advantage: column(2) }
}

/// `hand`'s outputs in fresh buffers.
fn fresh_with(hand: HandWritten, table: &FeatureTable) -> Outputs {
    let mut out = Outputs::default();
    hand(table, &mut out);
    out
}

fn evaluation(c: &mut Criterion) {
    let table = table();
    let options = EvalOptions { group_size: Some(GROUP), ..EvalOptions::default() };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("one-thread pool");
    for (name, file, hand, hand_divide) in FORMULAS {
        let compiled = CompiledProgram::new(&compile(file));
        let want = fresh_with(hand, &table);
        let got = pool.install(|| compiled.eval(&table, &options)).expect("finite");
        assert_close(name, &got, &want);
        match compiled.backend() {
            Backend::Native(path) => eprintln!("{name}: native kernel {}", path.display()),
            other => eprintln!("{name}: no native kernel ({other:?}); the block interpreter runs"),
        }
        let (mut space, mut compiled_out, mut hand_out) =
            (Workspace::default(), Outputs::default(), Outputs::default());
        // Both sides run on the pool's one thread and write into the same three buffers: which
        // core runs a side and which physical pages its buffers get move its time by up to 2x
        // from process to process (ratios of 0.7 and 1.2 for the same binary), so a side of
        // its own would pair one side's luck with the other's.
        let mut shared = Outputs::default();
        // The compiled program against `baseline` (called `label`), timed into `out`.
        let mut pair = |label: &str, baseline: HandWritten, out: &mut Outputs| {
            paired_ratio(
                name,
                label,
                out,
                |out| {
                    pool.install(|| compiled.eval_into(black_box(&table), &options, &mut space, out)).expect("finite")
                },
                |out| pool.install(|| baseline(black_box(&table), out)),
            )
        };
        pair("hand-written", hand, &mut shared);
        assert_close(name, &shared, &want);
        eprintln!("reward_eval/{name}: {}", offsets(compiled.program(), &table, &shared));
        // The same pair on output columns whose starts lie about 1 KiB apart modulo a page, where
        // the allocator put the three 8 MB columns 16 bytes apart: a kernel that reads an output
        // column back (the group sums read `reward`) while it stores the next ones may have its
        // loads held up by stores 4 KiB away ("4K aliasing").
        let mut staggered = staggered_outputs(ROLLOUTS);
        pair("hand-written, staggered outputs", hand, &mut staggered);
        assert_close(name, &staggered, &want);
        eprintln!("reward_eval/{name}: staggered {}", offsets(compiled.program(), &table, &staggered));
        // The dividing loop computes what the formula says, operation for operation: the same bits.
        let divided = fresh_with(hand_divide, &table);
        let bits =
            |o: &Outputs| [&o.reward, &o.adv, &o.advantage].map(|c| c.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
        assert!(bits(&divided) == bits(&got), "{name}: the dividing loop's values are not the compiled program's bits");
        pair("hand-written dividing", hand_divide, &mut shared);

        let mut group = c.benchmark_group(format!("reward_eval/{name}"));
        group.throughput(Throughput::Elements(ROLLOUTS as u64));
        group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        group.bench_function("compiled", |b| {
            b.iter(|| pool.install(|| compiled.eval(black_box(&table), &options)).expect("finite"))
        });
        group.bench_function("hand_written", |b| b.iter(|| fresh_with(hand, black_box(&table))));
        group.bench_function("compiled_into", |b| {
            b.iter(|| {
                pool.install(|| compiled.eval_into(black_box(&table), &options, &mut space, &mut compiled_out))
                    .expect("finite")
            })
        });
        group.bench_function("hand_written_into", |b| b.iter(|| hand(black_box(&table), &mut hand_out)));
        group.bench_function("interpreter", |b| {
            b.iter(|| pool.install(|| interp::eval(compiled.program(), black_box(&table), &options)).expect("finite"))
        });
        group.finish();
        assert_close(name, &compiled_out, &want);
        assert_close(name, &hand_out, &want);
    }
}

fn compilation(c: &mut Criterion) {
    let schema = rewardlab_rewards::feature_schema();
    let mut group = c.benchmark_group("reward_eval/parse_check_compile");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(2));
    for (name, file, ..) in FORMULAS {
        let path = format!("{}/rewards/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        group.bench_with_input(BenchmarkId::from_parameter(name), &text, |b, text| {
            b.iter(|| {
                let source = SourceFile::new(file, text.as_str());
                let (program, _) = compile_source(&source, &schema, &CheckOptions::default()).expect("checks");
                CompiledProgram::new(&program)
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("reward_eval/native_build");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
    let scratch = std::env::temp_dir().join(format!("rewardlab-bench-native-{}", std::process::id()));
    for (name, file, ..) in FORMULAS {
        let program = compile(file);
        let mut n = 0;
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                // A cache folder of its own per build: always a miss.
                n += 1;
                let options = CompileOptions {
                    native: NativeMode::Always,
                    cache_dir: Some(scratch.join(n.to_string())),
                    ..CompileOptions::default()
                };
                let compiled = CompiledProgram::with_options(&program, &options);
                assert!(matches!(compiled.backend(), Backend::Native(_)), "{name}: {:?}", compiled.backend());
                compiled
            })
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&scratch);
}

criterion_group!(benches, evaluation, compilation);
criterion_main!(benches);
