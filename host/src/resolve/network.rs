//! What bash commands may reach on the network: the `[network]` table of the user's config
//! and `--allow-domain`/`--add-host`, resolved into the sandbox's [`Network`]. `--bash-network`
//! (the whole network) wins over an allowlist; neither: nothing.

use crate::sandbox::{Allowlist, Network, Setting};
use crate::settings::Layers;

/// Why the network settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error(
        "an allowlist of hosts ({}) cannot be enforced with {}, whose commands have the host's \
         whole network; drop one of the two",
        Setting::Allowlist.and_key(),
        Setting::Unconfined
    )]
    Unconfined,
}

/// The network of bash commands under `s`, whose commands run unconfined when `unconfined`.
pub fn resolve(s: &Layers, unconfined: bool) -> Result<Network, NetworkError> {
    if s.last(|s| &s.network.open) == Some(&true) {
        return Ok(Network::Open);
    }
    let allowlist = Allowlist {
        patterns: (s.all(|s| &s.network.allow))
            .flat_map(|allow| allow.patterns())
            .cloned()
            .collect(),
        hosts: (s.all(|s| &s.network.hosts))
            .map(|m| (m.name.clone(), m.address))
            .collect(),
    };
    match allowlist.patterns.is_empty() {
        true => Ok(Network::Off),
        false if unconfined => Err(NetworkError::Unconfined),
        false => Ok(Network::Allow(allowlist)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    fn resolved(file: &str, args: &[&str]) -> Result<Network, NetworkError> {
        let file: Settings = toml::from_str(file).unwrap();
        let mut given = Settings::default();
        for arg in args {
            match arg.strip_prefix("--add-host=") {
                Some(host) => given.network.hosts.push(host.parse().unwrap()),
                None if *arg == "--bash-network" => given.network.open = Some(true),
                None => given.network.allow.push(arg.parse().unwrap()),
            }
        }
        let layers = Layers {
            file: &file,
            given: &given,
        };
        resolve(&layers, false)
    }

    #[test]
    fn config_and_command_line_join() {
        let Network::Allow(list) = resolved(
            "[network]\nallow = [\"pypi.org\"]",
            &["pkg.test:8080", "--add-host=pkg.test=127.0.0.1"],
        )
        .unwrap() else {
            panic!("no allowlist");
        };
        assert_eq!(
            list.describe(),
            "pypi.org, pkg.test:8080 (pkg.test is 127.0.0.1)"
        );
        assert_eq!(resolved("", &[]).unwrap(), Network::Off);
        assert_eq!(
            resolved("[network]\nallow = [\"pypi.org\"]", &["--bash-network"]).unwrap(),
            Network::Open
        );
        assert_eq!(
            resolved("[network]\nopen = true", &[]).unwrap(),
            Network::Open
        );
    }

    #[test]
    fn a_set_stands_for_its_hosts() {
        let Network::Allow(list) = resolved(
            "[network]\nallow = [\"@pypi\"]",
            &["@crates", "example.org"],
        )
        .unwrap() else {
            panic!("no allowlist");
        };
        assert_eq!(
            list.describe(),
            "pypi.org, files.pythonhosted.org, crates.io, index.crates.io, static.crates.io, \
             example.org"
        );
    }
}
