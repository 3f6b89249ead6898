//! The bench's fixture under `target/perf/`: the workspace the tools see and its generated text
//! files (1 GiB among them, written once and reused), a warm compile cache, a skills
//! directory, and the `cordon` command and library options pointed at them.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cordon::Options;

use crate::harness::MIB;

pub(crate) const CORDON: &str = env!("CARGO_BIN_EXE_cordon");

pub(crate) struct Dirs {
    /// `target/perf`.
    pub(crate) root: PathBuf,
    /// The workspace the tools see.
    pub(crate) ws: PathBuf,
    /// The warm compile cache.
    pub(crate) cache: PathBuf,
    /// A skills directory, so that `read_skill` is loaded too.
    pub(crate) skills: PathBuf,
}

impl Dirs {
    pub(crate) fn prepare() -> Self {
        // target/dist/cordon (the profile the bench is built in) → target/perf.
        let target = Path::new(CORDON).parent().unwrap().parent().unwrap();
        let root = target.join("perf");
        let dirs = Dirs {
            ws: root.join("ws"),
            cache: root.join("cache"),
            skills: root.join("skills"),
            root,
        };
        for dir in [&dirs.ws, &dirs.cache, &dirs.skills] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(
            dirs.skills.join("perf.md"),
            "---\ndescription: A skill for the benchmark.\n---\n# Perf\nNothing to do.\n",
        )
        .unwrap();
        std::fs::write(dirs.ws.join("small.txt"), text_lines(0, 200)).unwrap();
        let mut four = text_lines(0, 4096);
        four.truncate(4095);
        four.push('\n');
        std::fs::write(dirs.ws.join("4k.txt"), four).unwrap();
        generate(&dirs.ws.join("1m.txt"), MIB);
        generate(&dirs.ws.join("1g.txt"), 1 << 30);
        // Compile the plugins into the cache in a process of their own, so that no measurement
        // (the resident set above all) includes a compilation.
        let warm = dirs
            .cordon(&dirs.cache)
            .arg("--skills")
            .arg(&dirs.skills)
            .arg("tools")
            .output()
            .expect("cordon runs");
        assert!(warm.status.success(), "{warm:?}");
        dirs
    }

    /// The library runtime's options: the workspace, the warm cache, nothing from the user's
    /// configuration.
    pub(crate) fn options(&self) -> Options {
        let mut options = Options::new(&self.ws);
        options.settings.tools.cache_dir = Some(self.cache.clone());
        options.user_plugins = None;
        options.config = None;
        options
    }

    /// `cordon` on the workspace with the compile cache `cache`, logging at its default level.
    pub(crate) fn cordon(&self, cache: &Path) -> Command {
        let mut command = Command::new(CORDON);
        command
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--cache-dir")
            .arg(cache)
            .env_remove("RUST_LOG");
        command
    }

    pub(crate) fn path(&self, name: &str) -> String {
        self.ws.join(name).to_string_lossy().into_owned()
    }
}

/// Line `i` of the generated text files: ordinary text, 80 bytes.
fn line(i: u64) -> String {
    format!("{i:>10} the quick brown fox jumps over the lazy dog; lorem ipsum dolor sit amet.\n")
}

/// The lines from `from` on, at least `bytes` of them.
fn text_lines(from: u64, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 100);
    let mut i = from;
    while text.len() < bytes {
        i += 1;
        text.push_str(&line(i));
    }
    text
}

/// Writes the file of at least `size` bytes of lines at `path`, unless it is already there.
fn generate(path: &Path, size: u64) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() >= size) {
        return;
    }
    let started = Instant::now();
    let tmp = path.with_extension("tmp");
    let mut out = BufWriter::with_capacity(MIB as usize, std::fs::File::create(&tmp).unwrap());
    let (mut written, mut i) = (0u64, 0u64);
    while written < size {
        i += 1;
        let line = line(i);
        out.write_all(line.as_bytes()).unwrap();
        written += line.len() as u64;
    }
    out.into_inner().unwrap().sync_all().unwrap();
    std::fs::rename(&tmp, path).unwrap();
    eprintln!(
        "generated {} ({} bytes) in {:.1} s",
        path.display(),
        written,
        started.elapsed().as_secs_f64()
    );
}

/// The 100 000-line file of the `edit_file` measurements (5.8 MB).
pub(crate) fn hundred_thousand_lines() -> String {
    (0..100_000)
        .map(|i| format!("    let value_{i} = compute({i}, \"alpha beta gamma\");\n"))
        .collect()
}
