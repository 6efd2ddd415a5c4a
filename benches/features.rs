//! Rollout-feature throughput: every feature of the schema for 100k
//! generated rollouts, beside two baselines in the same group: a hand-written
//! loop computing only `Fb(file)` (the floor of one column), and parsing the
//! same rollouts from JSONL (what reading them costs anyway).
//!
//! Rollouts are realistic in size: groups of 8, 1–3 target files with 1–4
//! target ranges and 1–3 functions, predictions of 0–4 files and ranges drawn
//! partly from the targets, 1–4 turns of up to 8 calls each returning up to 20
//! entities from a small pool (so `e` sees repeats).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rewardlab_dsl::FeatureRef;
use rewardlab_rewards::rollout::{LoggedCall, Rollout, Selection};
use rewardlab_rewards::{Counts, FeatureOptions, LineRange, feature_schema, feature_table, load_rollouts};

const ROLLOUTS: usize = 100_000;
const GROUP: usize = 8;

fn file(rng: &mut ChaCha8Rng) -> String {
    format!("pkg/mod{}/file{}.py", rng.random_range(0..6), rng.random_range(0..20))
}

fn range(rng: &mut ChaCha8Rng, path: &str) -> LineRange {
    let start = rng.random_range(1..400);
    LineRange::new(path, start, start + rng.random_range(0..40))
}

fn rollouts(n: usize) -> Vec<Rollout> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut out = Vec::with_capacity(n);
    let mut target = Selection::default();
    for i in 0..n {
        if i % GROUP == 0 {
            let files: Vec<String> = (0..rng.random_range(1..=3)).map(|_| file(&mut rng)).collect();
            let ranges = (0..rng.random_range(1..=4)).map(|k| range(&mut rng, &files[k % files.len()])).collect();
            let functions =
                (0..rng.random_range(1..=3)).map(|k| format!("{}::C{k}.m{k}", files[k % files.len()])).collect();
            target = Selection { files: Some(files), line_ranges: Some(ranges), functions: Some(functions) };
        }
        let tfiles = target.files.as_deref().unwrap_or(&[]);
        let pfiles: Vec<String> =
            (0..rng.random_range(0..=4))
                .map(|_| {
                    if rng.random_bool(0.5) {
                        tfiles[rng.random_range(0..tfiles.len())].clone()
                    } else {
                        file(&mut rng)
                    }
                })
                .collect();
        let pranges = pfiles.iter().map(|f| range(&mut rng, f)).collect();
        let pfuncs = pfiles.iter().map(|f| format!("{f}::C0.m0")).collect();
        let turns = (0..rng.random_range(1..=4))
            .map(|t| {
                let calls = if t == 3 { 0 } else { rng.random_range(0..=8) };
                (0..calls)
                    .map(|_| LoggedCall {
                        tool: "grep".into(),
                        args: serde_json::Value::Null,
                        entities: Some(
                            (0..rng.random_range(0..=20))
                                .map(|_| format!("{}:{}", file(&mut rng), rng.random_range(1..60)).as_str().into())
                                .collect(),
                        ),
                    })
                    .collect()
            })
            .collect();
        out.push(Rollout {
            group: format!("task-{}", i / GROUP),
            predicted: Some(Selection { files: Some(pfiles), line_ranges: Some(pranges), functions: Some(pfuncs) }),
            target: Some(target.clone()),
            turns: Some(turns),
            completion_tokens: Some(rng.random_range(50..4096)),
            valid: Some(true),
            truncated: Some(false),
        });
    }
    out
}

/// Every feature of the schema at its default arguments.
fn all_features() -> Vec<FeatureRef> {
    let schema = feature_schema();
    let mut out = Vec::new();
    for decl in schema.decls() {
        let args: Vec<f64> = decl.params.iter().map(|p| p.default).collect();
        if decl.levels.is_empty() {
            out.push(FeatureRef::new(decl, None, args));
        } else {
            for level in &decl.levels {
                out.push(FeatureRef::new(decl, Some(level), args.clone()));
            }
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let data = rollouts(ROLLOUTS);
    let features = all_features();
    let jsonl: String = data.iter().map(|r| serde_json::to_string(r).expect("serialises") + "\n").collect();
    let options = FeatureOptions::default();

    let mut group = c.benchmark_group("features_100k");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(ROLLOUTS as u64));
    group.bench_function(format!("all {} features", features.len()), |b| {
        b.iter(|| feature_table(black_box(&features), black_box(&data), &options).expect("features compute"))
    });
    group.bench_function("baseline: hand loop, Fb(file) only", |b| {
        b.iter(|| {
            let v: Vec<f64> = black_box(&data)
                .iter()
                .map(|r| {
                    let p = r.predicted.as_ref().and_then(|s| s.files.as_deref()).unwrap_or(&[]);
                    let t = r.target.as_ref().and_then(|s| s.files.as_deref()).unwrap_or(&[]);
                    Counts::of_sets(p, t).f_beta(0.5)
                })
                .collect();
            v
        })
    });
    group.bench_function("baseline: parse the JSONL", |b| {
        b.iter(|| load_rollouts(black_box(jsonl.as_bytes())).expect("in-memory read"))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
