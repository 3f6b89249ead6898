//! The user's own toolchains (`--toolchains`): the per-user installations most developers
//! have under their home — rustup and cargo, pyenv, nvm, Go, uv, pipx, `~/.local/bin` — found
//! where they are on this machine, and what each needs granted for bash commands to use it.
//!
//! Only what is found is granted, and only what the tool needs: its installation read-only,
//! its binaries on `PATH`, its variables, and writable only the download caches it keeps
//! outside the home (cargo's registry, Go's module cache); caches kept in the home (pip, npm,
//! uv, Go's build cache) land in the commands' own home. Credentials a tool keeps beside its
//! installation (`~/.cargo/credentials.toml`) are not granted.

use std::path::{Path, PathBuf};

/// One toolchain found, and its grants.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Toolchain {
    /// What it is: `rustup`, `cargo`, `pyenv`, `nvm`, `go`, `uv`, `pipx`, `local-bin`.
    pub name: &'static str,
    /// Paths commands may read and execute from.
    pub read: Vec<PathBuf>,
    /// Paths commands may write (download caches).
    pub write: Vec<PathBuf>,
    /// Directories put on `PATH`.
    pub path: Vec<PathBuf>,
    /// Variables set.
    pub env: Vec<(String, String)>,
}

/// The toolchains found for the user whose home is `home`, with `var` reading cordon's
/// environment (for `CARGO_HOME`, `RUSTUP_HOME`, `PYENV_ROOT`, `NVM_DIR`, `GOPATH`).
pub fn detect(home: &Path, var: impl Fn(&str) -> Option<String>) -> Vec<Toolchain> {
    let dir = |name: &str, default: &str| {
        var(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(default))
    };
    let mut found = Vec::new();
    let mut add = |toolchain: Toolchain| {
        if !toolchain.read.is_empty() || !toolchain.path.is_empty() {
            found.push(toolchain);
        }
    };
    let existing = |paths: Vec<PathBuf>| paths.into_iter().filter(|p| p.exists()).collect();
    let env = |name: &str, path: &Path| (name.to_string(), path.display().to_string());

    let rustup = dir("RUSTUP_HOME", ".rustup");
    if rustup.join("toolchains").is_dir() {
        add(Toolchain {
            name: "rustup",
            read: vec![rustup.clone()],
            env: vec![env("RUSTUP_HOME", &rustup)],
            ..Toolchain::default()
        });
    }
    let cargo = dir("CARGO_HOME", ".cargo");
    if cargo.join("bin").is_dir() {
        add(Toolchain {
            name: "cargo",
            read: existing(vec![
                cargo.join("bin"),
                cargo.join("config.toml"),
                cargo.join("config"),
                cargo.join("env"),
            ]),
            write: vec![cargo.join("registry"), cargo.join("git")],
            path: vec![cargo.join("bin")],
            env: vec![env("CARGO_HOME", &cargo)],
        });
    }
    let pyenv = dir("PYENV_ROOT", ".pyenv");
    if pyenv.join("bin").is_dir() || pyenv.join("shims").is_dir() {
        add(Toolchain {
            name: "pyenv",
            read: vec![pyenv.clone()],
            path: existing(vec![pyenv.join("shims"), pyenv.join("bin")]),
            env: vec![env("PYENV_ROOT", &pyenv)],
            ..Toolchain::default()
        });
    }
    let nvm = dir("NVM_DIR", ".nvm");
    if let Some(node) = nvm_default(&nvm) {
        add(Toolchain {
            name: "nvm",
            read: vec![nvm.clone()],
            path: vec![node.join("bin")],
            env: vec![env("NVM_DIR", &nvm)],
            ..Toolchain::default()
        });
    }
    let gopath = dir("GOPATH", "go");
    let goroots: Vec<PathBuf> = existing(vec![home.join(".go"), home.join("sdk/go")]);
    if gopath.is_dir() || !goroots.is_empty() {
        let mut read = goroots.clone();
        let mut path: Vec<PathBuf> = goroots.iter().map(|r| r.join("bin")).collect();
        let mut write = Vec::new();
        let mut vars = Vec::new();
        if gopath.is_dir() {
            read.extend(existing(vec![gopath.join("bin")]));
            path.extend(existing(vec![gopath.join("bin")]));
            write.push(gopath.join("pkg/mod"));
            vars.push(env("GOPATH", &gopath));
        }
        if let Some(root) = goroots.first() {
            vars.push(env("GOROOT", root));
        }
        add(Toolchain {
            name: "go",
            read,
            write,
            path,
            env: vars,
        });
    }
    let uv = home.join(".local/share/uv");
    if uv.is_dir() {
        add(Toolchain {
            name: "uv",
            read: vec![uv],
            ..Toolchain::default()
        });
    }
    let pipx = home.join(".local/pipx");
    let pipx_share = home.join(".local/share/pipx");
    let pipx: Vec<PathBuf> = existing(vec![pipx, pipx_share]);
    if !pipx.is_empty() {
        add(Toolchain {
            name: "pipx",
            read: pipx,
            ..Toolchain::default()
        });
    }
    let local_bin = home.join(".local/bin");
    if local_bin.is_dir() {
        add(Toolchain {
            name: "local-bin",
            read: vec![local_bin.clone()],
            path: vec![local_bin],
            ..Toolchain::default()
        });
    }
    found
}

/// The node installation nvm would use: the one its `default` alias names, else the newest.
fn nvm_default(nvm: &Path) -> Option<PathBuf> {
    let versions = nvm.join("versions/node");
    let alias = std::fs::read_to_string(nvm.join("alias/default")).unwrap_or_default();
    let alias = alias.trim().trim_start_matches('v');
    let mut installed: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(&versions)
        .ok()?
        .flatten()
        .filter(|e| e.path().join("bin").is_dir())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let numbers = name
                .trim_start_matches('v')
                .split('.')
                .map(|n| n.parse().ok())
                .collect::<Option<Vec<u64>>>()?;
            Some((numbers, e.path()))
        })
        .collect();
    installed.sort();
    let named = installed.iter().rev().find(|(numbers, _)| {
        let text: Vec<String> = numbers.iter().map(u64::to_string).collect();
        !alias.is_empty() && text.join(".").starts_with(alias)
    });
    named.or(installed.last()).map(|(_, path)| path.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_is_there_and_nothing_else() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for dir in [
            ".rustup/toolchains/stable/bin",
            ".cargo/bin",
            ".cargo/registry",
            ".pyenv/shims",
            ".nvm/versions/node/v18.2.0/bin",
            ".nvm/versions/node/v20.11.1/bin",
            ".nvm/alias",
        ] {
            std::fs::create_dir_all(h.join(dir)).unwrap();
        }
        std::fs::write(h.join(".cargo/credentials.toml"), "token").unwrap();
        std::fs::write(h.join(".nvm/alias/default"), "18\n").unwrap();
        let found = detect(h, |_| None);
        let names: Vec<&str> = found.iter().map(|t| t.name).collect();
        assert_eq!(names, ["rustup", "cargo", "pyenv", "nvm"]);
        let cargo = &found[1];
        assert_eq!(cargo.read, [h.join(".cargo/bin")]);
        assert_eq!(cargo.path, [h.join(".cargo/bin")]);
        assert!(cargo.write.contains(&h.join(".cargo/registry")));
        assert_eq!(found[3].path, [h.join(".nvm/versions/node/v18.2.0/bin")]);
        assert!(detect(&h.join("nowhere"), |_| None).is_empty());
    }
}
