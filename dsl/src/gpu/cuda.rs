//! The cudarc runtime: probe, compile (NVRTC, cached by source hash and
//! architecture), upload, launch, download.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

use super::{BenchReport, GpuError, HostInputs};
use crate::codegen::{
    Arg, BATCH_BLOCKS, BATCH_THREADS, BLOCK_THREADS, CudaProgram, Grid, Launch, batch_op_code, source_hash,
};
use crate::hir::ReduceOp;
use crate::interp::ops;
use crate::ir::{IrProgram, Source};
use crate::table::Outputs;

/// Compiled modules, by (source hash, architecture). Modules belong to the
/// device's primary context, which every `CudaContext::new(0)` shares.
static MODULES: OnceLock<Mutex<ModuleCache>> = OnceLock::new();
type ModuleCache = HashMap<(u64, String), Arc<CudaModule>>;
/// The context of GPU 0, opened once: the cached modules belong to it.
static CONTEXT: Mutex<Option<Arc<CudaContext>>> = Mutex::new(None);

/// A device and the compiled kernels of programs run on it.
pub(crate) struct Backend {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    name: String,
    arch: String,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").field("name", &self.name).field("arch", &self.arch).finish_non_exhaustive()
    }
}

fn driver(during: &str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuError + '_ {
    move |e| GpuError::Driver { during: during.to_string(), message: format!("{e:?}") }
}

/// A program's functions, by launch index, and the batch kernels.
struct Functions {
    kernels: Vec<Option<CudaFunction>>,
    batch_partial: CudaFunction,
    batch_final: CudaFunction,
}

/// The device buffers of one evaluation.
struct Buffers {
    features: Vec<Option<CudaSlice<f32>>>,
    columns: Vec<CudaSlice<f32>>,
    groups: Vec<CudaSlice<f32>>,
    temps: Vec<CudaSlice<f32>>,
    offsets: CudaSlice<u64>,
    gid: CudaSlice<u32>,
    params: CudaSlice<f32>,
    batch: CudaSlice<f32>,
    partials: CudaSlice<f64>,
    scratch: CudaSlice<f64>,
    rows: u64,
    ngroups: u64,
}

/// Whether libcuda and libnvrtc can be loaded: cudarc loads them at the first call
/// and panics when they are missing, so they are looked for first.
#[cfg(not(feature = "cuda-linked"))]
fn probe_libraries() -> Result<(), GpuError> {
    // SAFETY: both probes only try to dlopen the library by its usual names.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(GpuError::NoDriver);
    }
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::NoNvrtc);
    }
    Ok(())
}

/// With cudarc's `dynamic-linking` (feature `cuda-linked`) the binary links libcuda and
/// libnvrtc, so it could not have started without them: nothing to probe. A driver that
/// cannot open a device (a link-time stub, no GPU) fails in `CudaContext::new` instead.
#[cfg(feature = "cuda-linked")]
fn probe_libraries() -> Result<(), GpuError> {
    Ok(())
}

impl Backend {
    pub(crate) fn new(code: &CudaProgram) -> Result<Backend, GpuError> {
        probe_libraries()?;
        let ctx = {
            let mut shared = CONTEXT.lock().map_err(|_| poisoned())?;
            match shared.as_ref() {
                Some(ctx) => ctx.clone(),
                None => {
                    let ctx = CudaContext::new(0).map_err(driver("opening GPU 0"))?;
                    *shared = Some(ctx.clone());
                    ctx
                }
            }
        };
        let (major, minor) = ctx.compute_capability().map_err(driver("querying the compute capability"))?;
        let name = ctx.name().map_err(driver("querying the device name"))?;
        let stream = ctx.default_stream();
        let backend = Backend { ctx, stream, name, arch: format!("sm_{major}{minor}") };
        backend.module(code)?;
        Ok(backend)
    }

    pub(crate) fn device(&self) -> String {
        format!("{} ({})", self.name, self.arch)
    }

    /// Compiles (or finds in the cache) a program's module.
    fn module(&self, code: &CudaProgram) -> Result<Arc<CudaModule>, GpuError> {
        let key = (source_hash(&code.source), self.arch.clone());
        let cache = MODULES.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(m) = cache.lock().map_err(|_| poisoned())?.get(&key) {
            return Ok(m.clone());
        }
        let options = CompileOptions {
            // No FMA contraction and no fast math: the C twin, which the
            // tests check against the interpreter, rounds every op alone.
            fmad: Some(false),
            use_fast_math: Some(false),
            options: vec![format!("--gpu-architecture={}", self.arch)],
            name: Some("rewardlab_reward.cu".to_string()),
            ..CompileOptions::default()
        };
        let ptx = compile_ptx_with_opts(&code.source, options)
            .map_err(|e| GpuError::Compile { arch: self.arch.clone(), log: compile_log(&e) })?;
        let module = self.ctx.load_module(ptx).map_err(driver("loading the compiled kernels"))?;
        cache.lock().map_err(|_| poisoned())?.insert(key, module.clone());
        Ok(module)
    }

    fn functions(&self, code: &CudaProgram) -> Result<Functions, GpuError> {
        let module = self.module(code)?;
        let load = |name: &str| module.load_function(name).map_err(driver("loading a kernel"));
        let kernels = code
            .launches
            .iter()
            .map(|l| match l {
                Launch::Kernel(k) => load(&k.name).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(Functions { kernels, batch_partial: load("rl_batch_partial")?, batch_final: load("rl_batch_final")? })
    }

    pub(crate) fn run(&self, ir: &IrProgram, code: &CudaProgram, inputs: &HostInputs) -> Result<Outputs, GpuError> {
        let functions = self.functions(code)?;
        let mut buffers = self.upload(ir, code, inputs)?;
        self.launch_all(code, &functions, &mut buffers)?;
        self.download(ir, &buffers)
    }

    pub(crate) fn bench(
        &self,
        ir: &IrProgram,
        fused: &CudaProgram,
        unfused: &CudaProgram,
        inputs: &HostInputs,
        reps: usize,
    ) -> Result<BenchReport, GpuError> {
        let time = |code: &CudaProgram| -> Result<f64, GpuError> {
            let functions = self.functions(code)?;
            let mut buffers = self.upload(ir, code, inputs)?;
            self.launch_all(code, &functions, &mut buffers)?;
            self.stream.synchronize().map_err(driver("warming up"))?;
            let start = Instant::now();
            for _ in 0..reps {
                self.launch_all(code, &functions, &mut buffers)?;
            }
            self.stream.synchronize().map_err(driver("timing the kernels"))?;
            Ok(start.elapsed().as_secs_f64() * 1e3 / reps as f64)
        };
        let fused_ms = time(fused)?;
        let unfused_ms = time(unfused)?;
        let bytes = inputs.min_bytes(ir);
        let half = (bytes / 8).max(1) as usize;
        let src: CudaSlice<f32> = self.stream.alloc_zeros(half).map_err(driver("allocating the copy source"))?;
        let mut dst: CudaSlice<f32> = self.stream.alloc_zeros(half).map_err(driver("allocating the copy target"))?;
        self.stream.memcpy_dtod(&src, &mut dst).map_err(driver("copying"))?;
        self.stream.synchronize().map_err(driver("copying"))?;
        let start = Instant::now();
        for _ in 0..reps {
            self.stream.memcpy_dtod(&src, &mut dst).map_err(driver("copying"))?;
        }
        self.stream.synchronize().map_err(driver("copying"))?;
        let copy_ms = start.elapsed().as_secs_f64() * 1e3 / reps as f64;
        let kernels = |c: &CudaProgram| c.launches.len();
        Ok(BenchReport {
            device: self.device(),
            rows: inputs.rows,
            fused_ms,
            fused_launches: kernels(fused),
            unfused_ms,
            unfused_launches: kernels(unfused),
            copy_ms,
            bytes,
        })
    }

    fn upload(&self, ir: &IrProgram, code: &CudaProgram, inputs: &HostInputs) -> Result<Buffers, GpuError> {
        let s = &self.stream;
        let up = driver("uploading the inputs");
        let zeros = |n: usize| s.alloc_zeros::<f32>(n.max(1)).map_err(driver("allocating device memory"));
        let features = inputs
            .features
            .iter()
            .map(|f| f.as_ref().map(|col| s.clone_htod(col.as_slice())).transpose())
            .collect::<Result<_, _>>()
            .map_err(driver("uploading the features"))?;
        let pad = |v: &[f32]| if v.is_empty() { vec![0.0] } else { v.to_vec() };
        Ok(Buffers {
            features,
            columns: (0..ir.columns.len()).map(|_| zeros(inputs.rows)).collect::<Result<_, _>>()?,
            groups: (0..ir.group_values).map(|_| zeros(inputs.groups)).collect::<Result<_, _>>()?,
            temps: (0..code.temps).map(|_| zeros(inputs.rows)).collect::<Result<_, _>>()?,
            offsets: s.clone_htod(inputs.offsets.as_slice()).map_err(driver("uploading the group offsets"))?,
            gid: s.clone_htod(if inputs.gid.is_empty() { &[0u32][..] } else { inputs.gid.as_slice() }).map_err(up)?,
            params: s.clone_htod(pad(&inputs.params).as_slice()).map_err(driver("uploading the params"))?,
            batch: zeros(ir.batch_values)?,
            partials: s.alloc_zeros::<f64>(BATCH_BLOCKS as usize).map_err(driver("allocating device memory"))?,
            // The mean of a std (0) and the selected count of a masked reduction (1).
            scratch: s.alloc_zeros::<f64>(2).map_err(driver("allocating device memory"))?,
            rows: inputs.rows as u64,
            ngroups: inputs.groups as u64,
        })
    }

    fn launch_all(&self, code: &CudaProgram, functions: &Functions, b: &mut Buffers) -> Result<(), GpuError> {
        for (k, launch) in code.launches.iter().enumerate() {
            match launch {
                Launch::Kernel(kernel) => {
                    let f = functions.kernels[k].as_ref().expect("kernel launches have functions");
                    let threads = match kernel.grid {
                        Grid::Rows => b.rows,
                        Grid::GroupWarps => b.ngroups * 32,
                    };
                    let blocks = threads.div_ceil(u64::from(BLOCK_THREADS)).clamp(1, 1 << 24) as u32;
                    let cfg = LaunchConfig {
                        grid_dim: (blocks, 1, 1),
                        block_dim: (BLOCK_THREADS, 1, 1),
                        shared_mem_bytes: 0,
                    };
                    let mut builder = self.stream.launch_builder(f);
                    for arg in &kernel.args {
                        // Every buffer is passed by shared reference: the
                        // kernels write through some of them, which Rust
                        // cannot see, and one stream orders all the work.
                        match *arg {
                            Arg::Rows => builder.arg(&b.rows),
                            Arg::Groups => builder.arg(&b.ngroups),
                            Arg::Feature(i) => builder.arg(feature(&b.features, i)?),
                            Arg::ColumnIn(c) | Arg::ColumnOut(c) => builder.arg(&b.columns[c]),
                            Arg::GroupIn(g) | Arg::GroupOut(g) => builder.arg(&b.groups[g]),
                            Arg::GroupIds => builder.arg(&b.gid),
                            Arg::Offsets => builder.arg(&b.offsets),
                            Arg::Params => builder.arg(&b.params),
                            Arg::Batch => builder.arg(&b.batch),
                            Arg::TempIn(t) | Arg::TempOut(t) => builder.arg(&b.temps[t]),
                        };
                    }
                    // SAFETY: the argument list is the kernel's signature
                    // (both come from the same `Kernel::args`), every buffer
                    // holds `n`, `ng` or `ng + 1` values as its parameter
                    // promises, and the kernels bound every index by them.
                    unsafe { builder.launch(cfg) }.map_err(driver("launching a kernel"))?;
                }
                Launch::BatchReduce { op, arg, mask, out } => {
                    self.batch_reduce(functions, b, *op, *arg, *mask, *out)?
                }
                Launch::BatchRank { arg, mask, out } => {
                    let host = |s: Source| -> Result<Vec<f64>, GpuError> {
                        let values = match s {
                            Source::Feature(i) => self.stream.clone_dtoh(feature(&b.features, i)?),
                            Source::Column(c) => self.stream.clone_dtoh(&b.columns[c]),
                            Source::None => unreachable!("rank takes an argument"),
                        }
                        .map_err(driver("downloading a column to rank"))?;
                        Ok(values.iter().take(b.rows as usize).map(|&x| f64::from(x)).collect())
                    };
                    let values = host(*arg)?;
                    let mut ranks = vec![0.0; values.len()];
                    match mask {
                        Some(m) => ops::rank_masked_into(&values, &host(*m)?, &mut ranks),
                        None => ops::rank_into(&values, &mut ranks),
                    }
                    let ranks: Vec<f32> = ranks.iter().map(|&r| r as f32).collect();
                    if !ranks.is_empty() {
                        self.stream
                            .memcpy_htod(ranks.as_slice(), &mut b.columns[*out])
                            .map_err(driver("uploading ranks"))?;
                    }
                }
            }
        }
        Ok(())
    }

    fn batch_reduce(
        &self,
        functions: &Functions,
        b: &mut Buffers,
        op: ReduceOp,
        arg: Source,
        mask: Option<Source>,
        out: usize,
    ) -> Result<(), GpuError> {
        let code = batch_op_code(op);
        let parts = BATCH_BLOCKS;
        let out = out as u32;
        let masked = i32::from(mask.is_some());
        // A masked reduction counts its selected rows first (pass 2).
        let mut passes: Vec<i32> = if mask.is_some() { vec![2] } else { Vec::new() };
        match op {
            ReduceOp::Count if mask.is_some() => {}
            ReduceOp::Std => passes.extend([0, 1]),
            _ => passes.push(0),
        }
        let column = |s: Source| -> Result<&CudaSlice<f32>, GpuError> {
            match s {
                Source::Feature(i) => feature(&b.features, i),
                Source::Column(c) => Ok(&b.columns[c]),
                Source::None => unreachable!("only count reads nothing"),
            }
        };
        for pass in passes {
            if op != ReduceOp::Count || pass == 2 {
                let m = column(mask.unwrap_or(arg))?;
                // An unmasked count reads no argument: the mask stands in for it.
                let x = if arg == Source::None { m } else { column(arg)? };
                let cfg =
                    LaunchConfig { grid_dim: (parts, 1, 1), block_dim: (BATCH_THREADS, 1, 1), shared_mem_bytes: 0 };
                let mut builder = self.stream.launch_builder(&functions.batch_partial);
                builder.arg(x).arg(m).arg(&masked).arg(&b.rows).arg(&code).arg(&pass).arg(&b.scratch).arg(&b.partials);
                // SAFETY: the prelude's signature (x, m, masked, n, op, pass,
                // scratch, partials); `m` is read only when `masked`, and
                // `partials` holds one double per block.
                unsafe { builder.launch(cfg) }.map_err(driver("launching a batch reduction"))?;
            }
            let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
            let mut builder = self.stream.launch_builder(&functions.batch_final);
            builder
                .arg(&b.partials)
                .arg(&parts)
                .arg(&b.rows)
                .arg(&code)
                .arg(&pass)
                .arg(&masked)
                .arg(&b.scratch)
                .arg(&b.batch)
                .arg(&out);
            // SAFETY: the prelude's signature (partials, parts, n, op, pass,
            // masked, scratch, B, out); `out` indexes the batch values and
            // `scratch` holds two doubles.
            unsafe { builder.launch(cfg) }.map_err(driver("launching a batch reduction"))?;
        }
        Ok(())
    }

    fn download(&self, ir: &IrProgram, b: &Buffers) -> Result<Outputs, GpuError> {
        let n = b.rows as usize;
        let get = |c: usize| -> Result<Vec<f64>, GpuError> {
            let v = self.stream.clone_dtoh(&b.columns[c]).map_err(driver("downloading the outputs"))?;
            Ok(v.iter().take(n).map(|&x| f64::from(x)).collect())
        };
        let o = ir.outputs;
        Ok(Outputs { reward: get(o.reward)?, adv: get(o.adv)?, advantage: get(o.advantage)? })
    }
}

fn feature(features: &[Option<CudaSlice<f32>>], i: usize) -> Result<&CudaSlice<f32>, GpuError> {
    features.get(i).and_then(|f| f.as_ref()).ok_or_else(|| GpuError::Driver {
        during: "binding kernel arguments".to_string(),
        message: format!("feature f{i} was not uploaded (a reach analysis bug)"),
    })
}

fn poisoned() -> GpuError {
    GpuError::Driver { during: "reading a cache".to_string(), message: "a thread panicked holding it".into() }
}

fn compile_log(e: &cudarc::nvrtc::CompileError) -> String {
    match e {
        cudarc::nvrtc::CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
        other => format!("{other:?}"),
    }
}
