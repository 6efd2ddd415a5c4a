//! What the sandbox benches share: a generated repository (written once, cached under
//! `target/rewardlab-bench/`) and its paths, `git` run without the
//! user's configuration, and a deterministic generator (so a cached repository is the same on
//! every machine).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A generated repository: its store, its bare repository, a checkout for `git grep`, a
/// scratch directory, and its commits in order.
pub struct Fixture {
    pub store_dir: PathBuf,
    pub bare: PathBuf,
    pub checkout: PathBuf,
    pub scratch: PathBuf,
    pub commits: Vec<String>,
}

/// `git ARGS` in `dir`; panics with git's stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_cmd(dir).args(args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A `git` command in `dir` that reads no global or system configuration.
fn git_cmd(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir).env("GIT_CONFIG_GLOBAL", "/dev/null").env("GIT_CONFIG_NOSYSTEM", "1");
    c
}

/// xorshift64: deterministic, so the cached repository is the same on every machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    #[allow(dead_code, reason = "one of the two benches picks words")]
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// What [`generated_fixture`] writes: `files` files in the first commit, then `commits - 1`
/// commits that each rewrite `touched_per_commit` files drawn at random.
pub struct Generated<'a> {
    pub version: &'a str,
    pub name: &'a str,
    pub seed: u64,
    pub commits: usize,
    pub files: usize,
    pub touched_per_commit: usize,
    /// The body of file `i` at commit `c`.
    pub body: &'a dyn Fn(&mut Rng, usize, usize) -> String,
    /// The path of file `i`.
    pub path: &'a dyn Fn(usize) -> String,
    /// Adds a `README.md` in the first commit.
    pub readme: bool,
}

/// Generates (once) the repository `spec` describes under `target/rewardlab-bench/<version>`, with
/// a checkout for the `git grep` baselines.
pub fn generated_fixture(spec: &Generated<'_>) -> Fixture {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/rewardlab-bench").join(spec.version);
    let store_dir = base.join("store");
    let bare = store_dir.join(format!("{}.git", spec.name));
    let checkout = base.join("checkout");
    let scratch = base.join("scratch");
    if !base.join("ready").exists() {
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&bare).expect("mkdir");
        git(&bare, &["init", "-q", "--bare"]);
        let mut rng = Rng(spec.seed);
        let mut stream = Vec::new();
        for c in 1..=spec.commits {
            let msg = format!("commit {c}");
            stream.extend_from_slice(
                format!(
                    "commit refs/heads/main\nmark :{c}\ncommitter B <b@x> {} +0000\ndata {}\n{msg}\n",
                    1_700_000_000 + c,
                    msg.len()
                )
                .as_bytes(),
            );
            if c > 1 {
                stream.extend_from_slice(format!("from :{}\n", c - 1).as_bytes());
            }
            let touched: Vec<usize> = if c == 1 {
                (0..spec.files).collect()
            } else {
                (0..spec.touched_per_commit).map(|_| rng.below(spec.files)).collect()
            };
            for i in touched {
                let body = (spec.body)(&mut rng, i, c);
                stream
                    .extend_from_slice(format!("M 100644 inline {}\ndata {}\n", (spec.path)(i), body.len()).as_bytes());
                stream.extend_from_slice(body.as_bytes());
                stream.push(b'\n');
            }
            if c == 1 && spec.readme {
                let readme = "# bench repo\n";
                stream.extend_from_slice(
                    format!("M 100644 inline README.md\ndata {}\n{readme}\n", readme.len()).as_bytes(),
                );
            }
        }
        let mut child =
            git_cmd(&bare).args(["fast-import", "--quiet"]).stdin(Stdio::piped()).spawn().expect("fast-import");
        child.stdin.take().expect("stdin").write_all(&stream).expect("stream");
        assert!(child.wait().expect("fast-import").success());
        git(&bare, &["symbolic-ref", "HEAD", "refs/heads/main"]);
        git(&bare, &["worktree", "add", "-q", "--detach", checkout.to_str().expect("utf-8"), "main"]);
        std::fs::write(base.join("ready"), "").expect("marker");
    }
    std::fs::create_dir_all(&scratch).expect("scratch");
    let commits = git(&bare, &["rev-list", "--reverse", "main"]).lines().map(str::to_owned).collect::<Vec<_>>();
    Fixture { store_dir, bare, checkout, scratch, commits }
}
