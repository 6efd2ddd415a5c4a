//! The C twin compiled by the system C compiler (`cc`), loaded with
//! `libloading`, run launch by launch, and compared with the interpreter.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::random;
use super::schema;
use super::*;
use crate::eval::{EvalOptions, NonFinite};
use crate::interp;
use crate::ir::{IrProgram, Source};
use crate::table::{FeatureTable, Outputs};

/// A scratch directory for one compilation, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rewardlab-codegen-{}-{tag}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("creating a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_compiler(cmd: &mut Command, what: &str, source: &Path) {
    let out = cmd.output().unwrap_or_else(|e| panic!("running the C compiler for {what}: {e}"));
    assert!(
        out.status.success(),
        "{what} does not compile:\n{}\n--- source: {}",
        String::from_utf8_lossy(&out.stderr),
        source.display()
    );
}

/// Declarations of the CUDA built-ins the generated source uses, enough for
/// the host C++ compiler to parse and type-check it.
const CUDA_SHIM: &str = r#"
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
struct rl_dim3 { unsigned int x, y, z; };
static rl_dim3 threadIdx, blockIdx, blockDim, gridDim;
static inline float __int_as_float(int) { return 0.0f; }
static inline double __shfl_xor_sync(unsigned int, double x, int) { return x; }
static inline int __any_sync(unsigned int, int x) { return x; }
static inline void __syncthreads() {}
"#;

pub(super) fn syntax_check_cuda(name: &str, source: &str) {
    let dir = Scratch::new("cuda");
    let shim = dir.0.join("shim.h");
    let file = dir.0.join(format!("{name}.cpp"));
    std::fs::write(&shim, CUDA_SHIM).expect("writing the shim");
    std::fs::write(&file, source).expect("writing the source");
    let mut cmd = Command::new("c++");
    cmd.args(["-fsyntax-only", "-Wall", "-Werror", "-Wno-unused-variable", "-Wno-unused-function", "-include"])
        .arg(&shim)
        .arg(&file);
    run_compiler(&mut cmd, name, &file);
    // Keep the file when the check fails (the panic skips this).
    drop(dir);
}

/// The element type the twin is compiled for.
trait Real: Copy + Default {
    const C_TYPE: &'static str;
    fn from_f64(x: f64) -> Self;
    fn to_f64(self) -> f64;
}

impl Real for f32 {
    const C_TYPE: &'static str = "float";
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
}

impl Real for f64 {
    const C_TYPE: &'static str = "double";
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn to_f64(self) -> f64 {
        self
    }
}

/// `rl_ctx` of the C prelude.
#[repr(C)]
struct Ctx<T> {
    n: u64,
    ng: u64,
    f: *const *const T,
    c: *const *mut T,
    g: *const *mut T,
    b: *mut T,
    p: *const T,
    gid: *const u32,
    off: *const u64,
    t: *const *mut T,
}

/// A compiled twin: its library and the launches its entries run.
struct Twin {
    lib: libloading::Library,
    launches: Vec<Launch>,
    temps: usize,
    _dir: Scratch,
}

fn build<T: Real>(ir: &IrProgram, fusion: Fusion) -> Twin {
    let dir = Scratch::new(T::C_TYPE);
    let src = dir.0.join("twin.c");
    let lib = dir.0.join("libtwin.so");
    std::fs::write(&src, emit_c(ir, fusion)).expect("writing the C twin");
    let mut cmd = Command::new("cc");
    cmd.args(["-std=c99", "-O1", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-Wall", "-Werror"])
        .args(["-Wno-unused-variable", "-Wno-unused-function", "-Wno-unused-but-set-variable"])
        .arg(format!("-DRL_REAL={}", T::C_TYPE))
        .arg(&src)
        .arg("-o")
        .arg(&lib)
        .arg("-lm");
    run_compiler(&mut cmd, "the C twin", &src);
    // SAFETY: the library is our own generated C with no initialisers.
    let lib = unsafe { libloading::Library::new(&lib) }.expect("loading the C twin");
    let p = plan(ir, fusion);
    Twin { lib, launches: p.launches, temps: p.temps, _dir: dir }
}

/// Runs every launch of the twin over the table, as the GPU runtime would.
fn run<T: Real>(twin: &Twin, ir: &IrProgram, table: &FeatureTable) -> Outputs {
    let n = table.rows();
    let ng = table.groups();
    let conv = |v: &[f64]| -> Vec<T> { v.iter().map(|&x| T::from_f64(x)).collect() };
    let features: Vec<Vec<T>> =
        ir.features.iter().map(|k| table.column(k).map(conv).unwrap_or_else(|| vec![T::default(); n])).collect();
    let mut columns: Vec<Vec<T>> = vec![vec![T::default(); n.max(1)]; ir.columns.len()];
    let mut groups: Vec<Vec<T>> = vec![vec![T::default(); ng.max(1)]; ir.group_values];
    let mut temps: Vec<Vec<T>> = vec![vec![T::default(); n.max(1)]; twin.temps];
    let mut batch: Vec<T> = vec![T::default(); ir.batch_values.max(1)];
    let params: Vec<T> = ir.params.iter().map(|(_, v)| T::from_f64(*v)).collect::<Vec<_>>();
    let params = if params.is_empty() { vec![T::default()] } else { params };
    let offsets: Vec<u64> = table.group_offsets().iter().map(|&o| o as u64).collect();
    let gid: Vec<u32> = (0..n).map(|i| table.group_of(i) as u32).collect();
    let fptrs: Vec<*const T> = features.iter().map(|v| v.as_ptr()).collect();
    for launch_index in 0..twin.launches.len() {
        if let Launch::BatchRank { arg, mask, out } = twin.launches[launch_index] {
            let read = |s: Source| -> Vec<f64> {
                match s {
                    Source::Feature(f) => features[f][..n].iter().map(|x| x.to_f64()).collect(),
                    Source::Column(c) => columns[c][..n].iter().map(|x| x.to_f64()).collect(),
                    Source::None => unreachable!("rank takes an argument"),
                }
            };
            let values = read(arg);
            let mut ranks = vec![0.0; n];
            match mask {
                Some(m) => crate::interp::ops::rank_masked_into(&values, &read(m), &mut ranks),
                None => crate::interp::ops::rank_into(&values, &mut ranks),
            }
            for (d, r) in columns[out].iter_mut().zip(ranks) {
                *d = T::from_f64(r);
            }
            continue;
        }
        let cptrs: Vec<*mut T> = columns.iter_mut().map(|v| v.as_mut_ptr()).collect();
        let gptrs: Vec<*mut T> = groups.iter_mut().map(|v| v.as_mut_ptr()).collect();
        let tptrs: Vec<*mut T> = temps.iter_mut().map(|v| v.as_mut_ptr()).collect();
        let ctx = Ctx {
            n: n as u64,
            ng: ng as u64,
            f: fptrs.as_ptr(),
            c: cptrs.as_ptr(),
            g: gptrs.as_ptr(),
            b: batch.as_mut_ptr(),
            p: params.as_ptr(),
            gid: gid.as_ptr(),
            off: offsets.as_ptr(),
            t: tptrs.as_ptr(),
        };
        let name = format!("rl_entry_{launch_index}");
        // SAFETY: every entry has this signature (`void (const rl_ctx*)`),
        // and every array in the context holds as many values as the
        // kernels index (n rows, ng groups, ng + 1 offsets).
        unsafe {
            let entry: libloading::Symbol<'_, unsafe extern "C" fn(*const Ctx<T>)> =
                twin.lib.get(name.as_bytes()).expect("every launch has an entry");
            entry(&ctx);
        }
    }
    let out = |c: usize| columns[c][..n].iter().map(|x| x.to_f64()).collect::<Vec<f64>>();
    let o = ir.outputs;
    Outputs { reward: out(o.reward), adv: out(o.adv), advantage: out(o.advantage) }
}

/// Groups of mixed sizes (1 to 12 rows) with every feature the program reads.
fn table_for(program: &Program, groups: usize, salt: u64) -> FeatureTable {
    let sizes: Vec<usize> = (0..groups).map(|g| 1 + (g * 7 + salt as usize) % 12).collect();
    let n: usize = sizes.iter().sum();
    let mut t = FeatureTable::new(sizes.iter().enumerate().map(|(g, &s)| (format!("g{g}"), s))).expect("non-empty");
    for f in &program.features {
        let col: Vec<f64> = (0..n).map(|i| schema::value(&f.key, i, salt)).collect();
        t.add_column(f.key.clone(), col).expect("one column per feature");
    }
    t
}

/// `got` equals the oracle to within `rel` of `max(|want|, 1)`.
fn assert_agree(what: &str, got: &Outputs, want: &Outputs, rel: f64) {
    let pairs = [
        ("reward", &got.reward, &want.reward),
        ("adv", &got.adv, &want.adv),
        ("advantage", &got.advantage, &want.advantage),
    ];
    for (output, g, w) in pairs {
        assert_eq!(g.len(), w.len());
        for (row, (&a, &b)) in g.iter().zip(w.iter()).enumerate() {
            let ok = a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= rel * b.abs().max(1.0);
            assert!(ok, "{what}: {output}[{row}] = {a}, the interpreter says {b}");
        }
    }
}

const ALLOW: EvalOptions = EvalOptions { group_size: None, non_finite: NonFinite::Allow };

#[test]
fn sample_files_in_double_equal_the_interpreter() {
    for (name, text) in SAMPLES {
        let p = compile(name, text);
        let ir = ir::lower(&p);
        for fusion in [Fusion::Fused, Fusion::Unfused] {
            let twin = build::<f64>(&ir, fusion);
            let t = table_for(&p, 500, 1);
            let want = interp::eval(&p, &t, &ALLOW).expect("evaluates");
            assert_agree(&format!("{name} {fusion:?} double"), &run::<f64>(&twin, &ir, &t), &want, 1e-12);
        }
    }
}

/// The GPU's arithmetic (f32 storage and math, f64 accumulation) meets the
/// documented 1e-5 bound of `gpu::close` on every sample file.
#[test]
fn sample_files_in_float_are_within_the_gpu_tolerance() {
    for (name, text) in SAMPLES {
        let p = compile(name, text);
        let ir = ir::lower(&p);
        let twin = build::<f32>(&ir, Fusion::Fused);
        for salt in [2, 3] {
            let t = table_for(&p, 2000, salt);
            let want = interp::eval(&p, &t, &ALLOW).expect("evaluates");
            let got = run::<f32>(&twin, &ir, &t);
            assert_eq!(crate::gpu::first_mismatch(&got, &want), None, "{name} (salt {salt})");
        }
    }
}

/// Random programs (every operator, group and batch reductions, ranks,
/// params): the double twin equals the interpreter, fused and unfused.
#[test]
fn random_programs_in_double_equal_the_interpreter() {
    for seed in 0..40 {
        let p = random::program(seed, true);
        let ir = ir::lower(&p);
        let t = table_for(&p, 60, seed);
        let want = interp::eval(&p, &t, &ALLOW).expect("evaluates");
        for fusion in [Fusion::Fused, Fusion::Unfused] {
            let got = run::<f64>(&build::<f64>(&ir, fusion), &ir, &t);
            assert_agree(&format!("seed {seed} {fusion:?}\n{ir}"), &got, &want, 1e-9);
        }
    }
}

/// Random well-conditioned programs (no pow, exp, log or division by a
/// computed value) in float are within the GPU tolerance.
#[test]
fn random_programs_in_float_are_within_the_gpu_tolerance() {
    for seed in 0..30 {
        let p = random::program(seed, false);
        let ir = ir::lower(&p);
        let t = table_for(&p, 200, seed);
        let want = interp::eval(&p, &t, &ALLOW).expect("evaluates");
        let got = run::<f32>(&build::<f32>(&ir, Fusion::Fused), &ir, &t);
        if let Some(m) = crate::gpu::first_mismatch(&got, &want) {
            panic!("seed {seed}: {m:?}\n{ir}");
        }
    }
}

/// The alert programs' C twins (which share their kernel bodies with the CUDA source) decide
/// every alert as the interpreter does, with the step metrics set as params between runs of
/// one compilation.
#[test]
fn alert_programs_in_double_decide_as_the_interpreter() {
    let p = crate::testing::backend_alerts();
    let mut held = vec![0usize; p.alerts.len()];
    for (i, count) in held.iter_mut().enumerate() {
        let alert = p.alert_program(i);
        let mut ir = ir::lower(&alert);
        let twin = build::<f64>(&ir, Fusion::Fused);
        for salt in 0..6 {
            let t = table_for(&alert, 3 + salt as usize, salt);
            for metrics in [[0.1, 0.5], [0.3, 2.0], [f64::NAN, 0.0], [-1.0, 0.95]] {
                for (name, &v) in p.metrics.iter().zip(&metrics) {
                    assert!(ir.set_param(name, v), "{name} is a param of the alert program");
                }
                let got = run::<f64>(&twin, &ir, &t).reward[0];
                let want = crate::interp::alerts::eval_alerts(&p, &t, &metrics).expect("evaluates")[i];
                assert_eq!(crate::interp::ops::truthy(got), want, "alert {i}, salt {salt}, metrics {metrics:?}");
                *count += usize::from(want);
            }
        }
    }
    assert!(held.iter().any(|&k| k > 0) && held.iter().any(|&k| k < 24), "{held:?}");
}
