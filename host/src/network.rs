//! What bash commands may reach on the network: the `[network]` table of the user's config
//! and `--allow-domain`/`--add-host`, settled into the sandbox's [`Network`]. `--bash-network`
//! (the whole network) wins over an allowlist; neither: nothing.

use crate::config::{Config, NetworkSettings};
use crate::shell::{Allowlist, Network, Pattern, egress, sets};

/// Why the network settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("{0}. Fix it in --allow-domain or the [network] table of cordon's config")]
    Pattern(egress::PatternError),
    #[error("{0}. Fix it in --add-host or the [network] table of cordon's config")]
    Host(egress::PatternError),
    #[error(
        "{0:?} is not a set of hosts; the sets are {sets}. Fix it in --allow-domain or the \
         [network] table of cordon's config",
        sets = sets::names()
    )]
    Set(String),
    #[error(
        "an allowlist of hosts (--allow-domain, [network] allow) cannot be enforced with \
         --unconfined-bash, whose commands have the host's whole network; drop one of the two"
    )]
    Unconfined,
}

/// Settles the network of `options.shell`: `config`'s `[network]` table first, then the
/// command line's ([`crate::Options::network`]).
pub fn settle(options: &mut crate::Options, config: &Config) -> Result<(), NetworkError> {
    options.network = config.network.then(&options.network);
    if options.shell.network == Network::Open {
        return Ok(());
    }
    let allowlist = allowlist(&options.network)?;
    options.shell.network = match allowlist.patterns.is_empty() {
        true => Network::Off,
        false if options.shell.unconfined => return Err(NetworkError::Unconfined),
        false => Network::Allow(allowlist),
    };
    Ok(())
}

fn allowlist(settings: &NetworkSettings) -> Result<Allowlist, NetworkError> {
    let mut patterns = Vec::new();
    for allow in &settings.allow {
        // A set (`@pypi`) stands for its hosts.
        let hosts = match allow.strip_prefix('@') {
            Some(set) => {
                (sets::hosts(set).ok_or_else(|| NetworkError::Set(allow.clone())))?.to_vec()
            }
            None => vec![allow.as_str()],
        };
        for host in hosts {
            patterns.push(host.parse::<Pattern>().map_err(NetworkError::Pattern)?);
        }
    }
    let hosts = settings
        .hosts
        .iter()
        .map(|h| egress::parse_host(h).map_err(NetworkError::Host))
        .collect::<Result<_, _>>()?;
    Ok(Allowlist { patterns, hosts })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settled(config: &str, cli: NetworkSettings, open: bool) -> Result<Network, NetworkError> {
        let config: Config = toml::from_str(config).unwrap();
        let mut options = crate::Options::new("/");
        options.network = cli;
        if open {
            options.shell.network = Network::Open;
        }
        settle(&mut options, &config).map(|()| options.shell.network)
    }

    #[test]
    fn config_and_command_line_join() {
        let cli = NetworkSettings {
            allow: vec!["pkg.test:8080".into()],
            hosts: vec!["pkg.test=127.0.0.1".into()],
        };
        let Network::Allow(list) =
            settled("[network]\nallow = [\"pypi.org\"]", cli, false).unwrap()
        else {
            panic!("no allowlist");
        };
        assert_eq!(
            list.describe(),
            "pypi.org, pkg.test:8080 (pkg.test is 127.0.0.1)"
        );
        assert_eq!(
            settled("", NetworkSettings::default(), false).unwrap(),
            Network::Off
        );
        assert_eq!(
            settled(
                "[network]\nallow = [\"pypi.org\"]",
                NetworkSettings::default(),
                true
            )
            .unwrap(),
            Network::Open
        );
    }

    #[test]
    fn a_set_stands_for_its_hosts() {
        let cli = NetworkSettings {
            allow: vec!["@crates".into(), "example.org".into()],
            hosts: Vec::new(),
        };
        let Network::Allow(list) = settled("[network]\nallow = [\"@pypi\"]", cli, false).unwrap()
        else {
            panic!("no allowlist");
        };
        assert_eq!(
            list.describe(),
            "pypi.org, files.pythonhosted.org, crates.io, index.crates.io, static.crates.io, \
             example.org"
        );
        let cli = NetworkSettings {
            allow: vec!["@pip".into()],
            hosts: Vec::new(),
        };
        let error = settled("", cli, false).unwrap_err().to_string();
        assert!(
            error.starts_with("\"@pip\" is not a set of hosts; the sets are @pypi, @npm, "),
            "{error}"
        );
    }

    #[test]
    fn bad_patterns_say_where_to_fix_them() {
        let cli = NetworkSettings {
            allow: vec!["*".into()],
            hosts: Vec::new(),
        };
        let error = settled("", cli, false).unwrap_err().to_string();
        assert!(error.contains("--bash-network"), "{error}");
        assert!(error.contains("--allow-domain"), "{error}");
    }
}
