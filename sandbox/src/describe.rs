//! What commands run under, told to the model: built from the [`Policy`] that the sandbox
//! enforces, so what the model reads about its timeout, network, tools, limits and what lasts
//! between calls cannot drift from what holds.

use std::fmt::Write as _;

use super::{HOME, Network, Policy};

impl Policy {
    /// The sandbox commands run in, for the model: one paragraph per fact, each a line.
    pub fn describe(&self) -> String {
        let mut text = String::from("The sandbox commands run in:\n");
        let (usual, most) = (self.timeout_secs(), self.max_timeout_secs());
        let _ = write!(
            text,
            "- Time: a command is killed after {usual} seconds, with everything it started."
        );
        text.push_str(&match most > usual {
            true => format!(
                " For a longer build or test run, add \"timeout\": SECONDS to the input (at most \
                 {most}).\n"
            ),
            false => " No command may be given more: split long work into shorter commands.\n"
                .to_string(),
        });
        if self.unconfined {
            text.push_str(
                "- Confinement: none. Commands run with the user's own rights on the whole \
                 machine and its network; only the time limit and the clean environment apply.\n",
            );
        } else {
            let _ = writeln!(text, "- Files: {}", self.files());
            text.push_str(&self.network_line());
            let _ = writeln!(text, "- Limits: {}", self.limits());
        }
        let _ = writeln!(text, "- Programs: {}", self.programs());
        let _ = write!(text, "- What lasts between calls: {}", self.lasting());
        text
    }

    fn network_line(&self) -> String {
        match &self.network {
            Network::Off => "- Network: none. No host can be reached (no package registry, no \
                             git remote): a client that uses HTTP_PROXY (curl, pip, npm, cargo, \
                             git) is refused at once, and the output ends with the host and the \
                             option that would allow it. The loopback works: a server a command \
                             starts on 127.0.0.1 answers its clients within the same command.\n"
                .into(),
            Network::Allow(list) => {
                let hosts: Vec<String> = list.patterns.iter().map(|p| p.to_string()).collect();
                format!(
                    "- Network: only these hosts (on ports 80 and 443 unless a port is named), \
                     through cordon's proxy, which HTTP_PROXY and HTTPS_PROXY name (curl, pip, \
                     npm, cargo and git use it): {}. Any other host is refused. The command's \
                     own loopback works: a server it starts on 127.0.0.1 answers within the \
                     same call.\n",
                    hosts.join(", ")
                )
            }
            Network::Open => "- Network: the host's whole network, its services on 127.0.0.1 \
                              included.\n"
                .into(),
        }
    }

    fn files(&self) -> String {
        let list = |paths: &[std::path::PathBuf]| {
            let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            shown.join(", ")
        };
        let mut files = String::from(
            "read and write the workspace and /tmp; read the system directories (/usr, /etc…)",
        );
        if !self.extra_read.is_empty() {
            let _ = write!(files, " and {}", list(&self.extra_read));
        }
        if !self.extra_write.is_empty() {
            let _ = write!(files, "; write {}", list(&self.extra_write));
        }
        files.push_str(
            "; nothing else of the machine. Git hooks and config, .envrc and editor settings \
             in the workspace are read-only",
        );
        match self.unprotect.is_empty() {
            true => files.push('.'),
            false => {
                let _ = write!(files, ", but for {}.", list(&self.unprotect));
            }
        }
        files
    }

    fn limits(&self) -> String {
        let memory = match self.memory_limit {
            Some(bytes) => format!(
                "{} MiB of memory for all of a command's processes together (its files in /tmp \
                 count too)",
                bytes >> 20
            ),
            None => "no memory limit".into(),
        };
        format!(
            "{memory}; at most {} processes and threads at once.",
            self.max_processes
        )
    }

    fn programs(&self) -> String {
        let system = "the system's (/usr/bin, /bin)";
        if self.path.is_empty() {
            return format!("{system} only.");
        }
        let dirs: Vec<String> = self.path.iter().map(|p| p.display().to_string()).collect();
        format!("{system}, and before them on PATH: {}.", dirs.join(", "))
    }

    fn lasting(&self) -> String {
        let home = match (&self.home, self.unconfined) {
            (Some(_), false) => {
                format!("HOME ({HOME}), where tools keep their caches (pip, npm, cargo)")
            }
            (Some(dir), true) => format!("HOME ({})", dir.display()),
            (None, _) => "not HOME, which is empty at every call".into(),
        };
        format!(
            "the workspace and {home}; /tmp lasts as long as the session. Nothing else \
             carries over: no variables, no current directory, no background process.\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_description_follows_the_policy() {
        let mut policy = Policy::new(PathBuf::from("/ws"));
        let text = policy.describe();
        assert!(text.contains("killed after 30 seconds"), "{text}");
        assert!(
            text.contains("\"timeout\": SECONDS to the input (at most 600)"),
            "{text}"
        );
        assert!(text.contains("- Network: none."), "{text}");
        assert!(text.contains("4096 MiB of memory"), "{text}");
        assert!(text.contains("at most 512 processes"), "{text}");
        assert!(
            text.contains("not HOME, which is empty at every call"),
            "{text}"
        );

        policy.timeout = Duration::from_secs(120);
        policy.max_timeout = Duration::from_secs(60);
        policy.network = Network::Allow(crate::Allowlist {
            patterns: vec![
                "pypi.org".parse().unwrap(),
                "*.npmjs.org:8443".parse().unwrap(),
            ],
            hosts: Vec::new(),
        });
        policy.path = vec![PathBuf::from("/root/.cargo/bin")];
        policy.home = Some(PathBuf::from("/data/homes/ws"));
        policy.memory_limit = Some(1 << 30);
        let text = policy.describe();
        assert!(text.contains("killed after 120 seconds"), "{text}");
        assert!(text.contains("No command may be given more"), "{text}");
        assert!(
            text.contains(": pypi.org, *.npmjs.org:8443. Any other"),
            "{text}"
        );
        assert!(text.contains("on PATH: /root/.cargo/bin."), "{text}");
        assert!(
            text.contains("HOME (/home/cordon), where tools keep"),
            "{text}"
        );
        assert!(text.contains("1024 MiB of memory"), "{text}");

        policy.network = Network::Open;
        assert!(policy.describe().contains("the host's whole network"));
    }
}
