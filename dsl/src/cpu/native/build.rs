//! Compiling a kernel's C source with the system C compiler into a shared
//! library, cached on disk by a hash of the source, the compiler's identity
//! and the flags (`rl-<hash>.so`, with its source beside it as `rl-<hash>.c`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::NativeError;
use crate::codegen::source_hash;

/// The C compiler: `REWARDLAB_CC`, else `cc`.
pub(crate) fn default_compiler() -> PathBuf {
    std::env::var_os("REWARDLAB_CC").filter(|v| !v.is_empty()).map_or_else(|| PathBuf::from("cc"), PathBuf::from)
}

/// Where compiled kernels are kept: `REWARDLAB_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/rewardlab/native`, else `~/.cache/rewardlab/native`,
/// else a folder in the system's temporary directory.
pub(crate) fn default_cache_dir() -> PathBuf {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("REWARDLAB_CACHE_DIR") {
        return dir;
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return dir.join("rewardlab").join("native");
    }
    if let Some(home) = var("HOME") {
        return home.join(".cache").join("rewardlab").join("native");
    }
    std::env::temp_dir().join("rewardlab-native")
}

/// The flags every kernel is compiled with. No fast math and no FMA
/// contraction, so each operation rounds as Rust's does; `-fno-math-errno`
/// only lets `sqrt` be one instruction (errno is never read). The target
/// flags name the widest x86-64 level this CPU runs, so the compiler may
/// use 256-bit vectors; the level is part of the cache key.
fn flags() -> Vec<&'static str> {
    let mut flags =
        vec!["-std=c99", "-O3", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno"];
    flags.extend(target_flags());
    flags
}

#[cfg(target_arch = "x86_64")]
fn target_flags() -> Option<&'static str> {
    use std::arch::is_x86_feature_detected as has;
    let v3 = has!("avx")
        && has!("avx2")
        && has!("bmi1")
        && has!("bmi2")
        && has!("f16c")
        && has!("fma")
        && has!("lzcnt")
        && has!("movbe")
        && has!("xsave");
    v3.then_some("-march=x86-64-v3")
}

#[cfg(not(target_arch = "x86_64"))]
fn target_flags() -> Option<&'static str> {
    None
}

/// The compiler's `--version` output, asked once per compiler per process.
fn identity(cc: &Path) -> Result<String, NativeError> {
    static SEEN: OnceLock<std::sync::Mutex<Vec<(PathBuf, String)>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    if let Some((_, id)) = seen.lock().expect("no panics while held").iter().find(|(p, _)| p == cc) {
        return Ok(id.clone());
    }
    let out = Command::new(cc)
        .arg("--version")
        .output()
        .map_err(|e| NativeError::NoCompiler { compiler: cc.to_path_buf(), message: e.to_string() })?;
    if !out.status.success() {
        return Err(NativeError::NoCompiler {
            compiler: cc.to_path_buf(),
            message: format!("`--version` exited with {}", out.status),
        });
    }
    let id = String::from_utf8_lossy(&out.stdout).into_owned();
    seen.lock().expect("no panics while held").push((cc.to_path_buf(), id.clone()));
    Ok(id)
}

/// The shared library built from `source`: found in `cache`, or compiled
/// there (into a file of its own, renamed into place, so processes and
/// threads building the same kernel at once never see a partial file).
pub(crate) fn library(source: &str, cc: &Path, cache: &Path) -> Result<PathBuf, NativeError> {
    let flags = flags();
    let key = format!("{}\n{}\n{source}", identity(cc)?, flags.join(" "));
    let name = format!("rl-{:016x}", source_hash(&key));
    let lib = cache.join(format!("{name}.so"));
    if lib.is_file() {
        return Ok(lib);
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e: std::io::Error| NativeError::Io { path, message: e.to_string() }
    };
    std::fs::create_dir_all(cache).map_err(io(cache))?;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let tag = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
    let c_file = cache.join(format!("{name}.{tag}.c"));
    let tmp = cache.join(format!("{name}.{tag}.so.tmp"));
    std::fs::write(&c_file, source).map_err(io(&c_file))?;
    let out = Command::new(cc).args(&flags).arg(&c_file).arg("-o").arg(&tmp).arg("-lm").output();
    // The source stays beside its library, for whoever wants to read it.
    let _ = std::fs::rename(&c_file, cache.join(format!("{name}.c")));
    let out = out.map_err(|e| NativeError::NoCompiler { compiler: cc.to_path_buf(), message: e.to_string() })?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(NativeError::Compile {
            compiler: cc.to_path_buf(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    std::fs::rename(&tmp, &lib).map_err(io(&lib))?;
    Ok(lib)
}
