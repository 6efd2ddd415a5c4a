//! Native kernels: a one-pass program as one generated C function, compiled
//! by the system C compiler, cached on disk and loaded with `libloading`.
//!
//! The function (`emit`) runs every stage over a range of whole groups the
//! way a hand-written loop would: the reward stage in one fused loop over
//! the rows, then per group its reductions and the advantage rows, every
//! value a local the compiler keeps in (vector) registers. The caller runs
//! it on the table's blocks of whole groups, in parallel with rayon, each
//! call writing only its own rows and groups. Output values are checked for
//! NaN and infinities tile by tile, once a tile's rows are written.
//!
//! The library is built once per program text, compiler and flags (`build`)
//! and found again in the cache by the next process. Loading checks the
//! library's ABI (`rl_native_abi`) against this crate's `rl_args` layout.

mod build;
mod emit;

use std::ffi::{c_int, c_uint};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use super::Workspace;
use super::exec::{self, sized};
use crate::ir::IrProgram;
use crate::table::FeatureTable;

pub(crate) use build::{default_cache_dir, default_compiler};
pub(crate) use emit::unsupported;

/// Why a program runs on the block interpreter rather than native code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NativeError {
    /// [`NativeMode::Off`](super::NativeMode::Off), or `REWARDLAB_NATIVE=off`.
    #[error("native kernels are turned off")]
    Off,
    /// The program uses something the generated loop does not express.
    #[error("the program has {0}, which native kernels do not run")]
    Unsupported(&'static str),
    /// The C compiler could not be run.
    #[error("cannot run the C compiler `{}`: {message}", .compiler.display())]
    NoCompiler {
        /// The compiler that was tried.
        compiler: PathBuf,
        /// What the system said.
        message: String,
    },
    /// The C compiler rejected the generated source.
    #[error("the C compiler `{}` failed:\n{stderr}", .compiler.display())]
    Compile {
        /// The compiler that failed.
        compiler: PathBuf,
        /// Its error output.
        stderr: String,
    },
    /// Reading or writing the kernel cache failed.
    #[error("{}: {message}", .path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        message: String,
    },
    /// The compiled library could not be loaded or has another ABI.
    #[error("cannot load {}: {message}", .path.display())]
    Load {
        /// The shared library.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// `rl_args` of the generated C: every pointer the kernel reads.
#[repr(C)]
struct Args {
    off: *const usize,
    f: *const *const f64,
    c: *const *mut f64,
    g: *const *mut f64,
    p: *const f64,
}

/// [`Args`] shared by the threads of one run.
struct SharedArgs(Args);

// SAFETY: the pointers are only read through by the kernel calls of one
// `run`, during which every array they point to is alive and not otherwise
// accessed; concurrent calls write disjoint rows and groups (see `run`).
unsafe impl Sync for SharedArgs {}

impl SharedArgs {
    /// A method, not `&shared.0`, so that closures capture the `Sync` wrapper.
    fn get(&self) -> *const Args {
        &self.0
    }
}

type RunFn = unsafe extern "C" fn(*const Args, usize, usize) -> c_int;
type AbiFn = unsafe extern "C" fn() -> c_uint;

/// A loaded native kernel.
pub(crate) struct Kernel {
    run: RunFn,
    path: PathBuf,
    /// Keeps `run` mapped; dropped last.
    _library: libloading::Library,
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Kernel {
    /// Generates, compiles (or finds in `cache`) and loads `ir`'s kernel.
    pub(crate) fn new(ir: &IrProgram, cc: &Path, cache: &Path) -> Result<Kernel, NativeError> {
        if let Some(what) = unsupported(ir) {
            return Err(NativeError::Unsupported(what));
        }
        let source = emit::emit(ir);
        let path = build::library(&source, cc, cache)?;
        let load = |message: String| NativeError::Load { path: path.clone(), message };
        // SAFETY: the library is one this crate generated and compiled (or
        // found under the hash of that very source in the cache); its code
        // has no initialisers, so loading it runs nothing.
        let library = unsafe { libloading::Library::new(&path) }.map_err(|e| load(e.to_string()))?;
        // SAFETY: `rl_native_abi` is defined by the generated prelude with
        // exactly this type (`unsigned (void)`).
        let abi: AbiFn = *unsafe { library.get::<AbiFn>(b"rl_native_abi\0") }.map_err(|e| load(e.to_string()))?;
        // SAFETY: as above; the function only computes a constant.
        let found = unsafe { abi() };
        let want = emit::abi(size_of::<Args>(), size_of::<usize>());
        if found != want {
            return Err(load(format!("ABI {found:#x}, this build needs {want:#x}")));
        }
        // SAFETY: with the ABI checked, `rl_native_run` has exactly this type
        // (`int (const rl_args*, size_t, size_t)`).
        let run: RunFn = *unsafe { library.get::<RunFn>(b"rl_native_run\0") }.map_err(|e| load(e.to_string()))?;
        Ok(Kernel { run, path, _library: library })
    }

    /// The shared library this kernel was loaded from.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Runs `kernel` over the whole table into `space`, as `exec::run` does:
/// every column the program writes is sized to the table in `space` (buffers
/// reused) and holds its values afterwards. Group values live on the kernel's
/// stack, one tile of groups at a time (`emit`), so `space` holds none. `true`
/// when some output value is NaN or infinite.
pub(crate) fn run(
    kernel: &Kernel,
    ir: &IrProgram,
    table: &FeatureTable,
    features: &[Option<&[f64]>],
    space: &mut Workspace,
) -> bool {
    // A one-pass program writes every column it has.
    space.columns.resize_with(ir.columns.len(), Vec::new);
    for column in space.columns.iter_mut() {
        *column = sized(std::mem::take(column), table.rows());
    }
    let f: Vec<*const f64> = features.iter().map(|f| f.map_or(std::ptr::null(), <[f64]>::as_ptr)).collect();
    let c: Vec<*mut f64> = space.columns.iter_mut().map(|v| v.as_mut_ptr()).collect();
    // The ABI keeps a slot for group-value arrays; today's kernels take none.
    let g: Vec<*mut f64> = Vec::new();
    let p: Vec<f64> = ir.params.iter().map(|(_, v)| *v).collect();
    let offsets = table.group_offsets();
    let args = SharedArgs(Args { off: offsets.as_ptr(), f: f.as_ptr(), c: c.as_ptr(), g: g.as_ptr(), p: p.as_ptr() });
    let non_finite = AtomicBool::new(false);
    exec::blocks(table).par_iter().with_min_len(8).for_each(|block| {
        // SAFETY: `args` points at the table's `groups + 1` offsets, a
        // column of `rows` values for every feature the program reads
        // (`prepare` resolved them; unread ones are null and never touched),
        // a buffer of `rows` values for every column (sized above) and every
        // param. The call reads and writes only rows and groups of `block`, and blocks are
        // disjoint, so concurrent calls never write the same element, and
        // nothing else touches the buffers until `for_each` returns.
        let bad = unsafe { (kernel.run)(args.get(), block.groups.start, block.groups.end) };
        if bad != 0 {
            non_finite.store(true, Ordering::Relaxed);
        }
    });
    non_finite.into_inner()
}
