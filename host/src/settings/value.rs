//! The typed values of settings: each is read from its text by one `FromStr`, whether the
//! command line gives it (`--timeout 30`) or cordon's config file (`timeout = 30`), so a bad
//! value is refused where it is read, with the same reason either way. A number may be written
//! as a TOML number or as a string.

use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};

use crate::sandbox::{Pattern, RESERVED, Setting, egress, sets};

/// Why the text of a setting is not a value of it.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("{0:?} is not a whole number")]
    NotNumber(String),
    #[error("commands may not be given no time; use 1 or more seconds")]
    NoTime,
    #[error("0 MiB leaves no room at all; use 1 or more")]
    NoMemory,
    #[error("a limit of 0 processes would not let bash itself run; use 1 or more")]
    NoProcesses,
    #[error(transparent)]
    Pattern(#[from] egress::PatternError),
    #[error("{0:?} is not a set of hosts; the sets are {sets}", sets = sets::names())]
    Set(String),
    #[error(
        "not a variable name (letters, digits and _, not starting with a digit; a trailing * \
         passes every variable it starts)"
    )]
    Name,
    #[error(
        "PATH, HOME and TMPDIR are set by cordon; use {} to extend PATH and {} to choose the \
         home",
        Setting::BashPath,
        Setting::BashHome(None)
    )]
    Reserved,
    #[error(transparent)]
    Layer(#[from] crate::sandbox::NotOptional),
}

/// Whole seconds, at least one: a timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Secs(u64);

impl Secs {
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.0)
    }
}

impl FromStr for Secs {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<Self, ValueError> {
        match number(text)? {
            0 => Err(ValueError::NoTime),
            secs => Ok(Secs(secs)),
        }
    }
}

/// Mebibytes, at least one: a memory limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mib(u64);

impl Mib {
    pub fn bytes(&self) -> u64 {
        self.0.saturating_mul(1 << 20)
    }

    pub fn size(&self) -> usize {
        usize::try_from(self.bytes()).unwrap_or(usize::MAX)
    }
}

impl FromStr for Mib {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<Self, ValueError> {
        match number(text)? {
            0 => Err(ValueError::NoMemory),
            mib => Ok(Mib(mib)),
        }
    }
}

/// How many processes and threads, at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Processes(u32);

impl Processes {
    pub fn get(&self) -> u32 {
        self.0
    }
}

impl FromStr for Processes {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<Self, ValueError> {
        let n = number(text)?;
        match u32::try_from(n) {
            Ok(0) => Err(ValueError::NoProcesses),
            Ok(n) => Ok(Processes(n)),
            Err(_) => Err(ValueError::NotNumber(text.to_string())),
        }
    }
}

fn number(text: &str) -> Result<u64, ValueError> {
    text.trim()
        .parse()
        .map_err(|_| ValueError::NotNumber(text.to_string()))
}

/// Where a command's `HOME` comes from: `workspace`, `private` or a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Home {
    /// A directory of its own for each workspace, under cordon's data directory, that lasts
    /// between calls and sessions (the default).
    Workspace,
    /// An empty directory for each call.
    Private,
    /// This directory.
    Dir(PathBuf),
}

impl FromStr for Home {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(match text {
            "workspace" => Home::Workspace,
            "private" => Home::Private,
            dir => Home::Dir(PathBuf::from(dir)),
        })
    }
}

/// A variable for commands: `NAME=VALUE` sets it, `NAME` passes cordon's own value through,
/// `PREFIX*` passes every variable starting with `PREFIX` but secret-looking ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Variable {
    Set(String, String),
    Pass(String),
    Prefix(String),
}

impl FromStr for Variable {
    type Err = ValueError;

    fn from_str(spec: &str) -> Result<Self, ValueError> {
        let (name, value) = match spec.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (spec, None),
        };
        let (stem, pattern) = match name.strip_suffix('*') {
            Some(stem) if value.is_none() => (stem, true),
            _ => (name, false),
        };
        let valid = stem.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !stem.starts_with(|c: char| c.is_ascii_digit())
            && (pattern || !stem.is_empty());
        if !valid {
            return Err(ValueError::Name);
        }
        if !pattern && RESERVED.contains(&stem) {
            return Err(ValueError::Reserved);
        }
        Ok(match (value, pattern) {
            (Some(value), _) => Variable::Set(name.to_string(), value.to_string()),
            (None, false) => Variable::Pass(name.to_string()),
            (None, true) => Variable::Prefix(stem.to_string()),
        })
    }
}

/// A host commands may reach: a pattern (a name, `*.` and a name, or an address, with an
/// optional `:PORT`), or a named set of hosts (`@pypi`), which stands for its patterns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allow(Vec<Pattern>);

impl Allow {
    pub fn patterns(&self) -> &[Pattern] {
        &self.0
    }
}

impl FromStr for Allow {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<Self, ValueError> {
        let hosts = match text.strip_prefix('@') {
            Some(set) => sets::hosts(set).ok_or_else(|| ValueError::Set(text.to_string()))?,
            None => &[text][..],
        };
        let patterns = hosts.iter().map(|h| h.parse()).collect::<Result<_, _>>()?;
        Ok(Allow(patterns))
    }
}

/// `NAME=ADDRESS`: the address the proxy connects to for a name, without resolving it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub name: String,
    pub address: IpAddr,
}

impl FromStr for Mapping {
    type Err = ValueError;

    fn from_str(text: &str) -> Result<Self, ValueError> {
        let (name, address) = egress::parse_host(text)?;
        Ok(Mapping { name, address })
    }
}

/// The values a config file gives as text or as a number, read by their `FromStr`.
macro_rules! deserialize_from_str {
    ($($ty:ty: $expected:literal),* $(,)?) => {$(
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_any(Parsed::<$ty>($expected, PhantomData))
            }
        }
    )*};
}

deserialize_from_str!(
    Secs: "a number of seconds",
    Mib: "a number of MiB",
    Processes: "a number of processes",
    Home: "\"workspace\", \"private\" or a directory",
    Variable: "NAME=VALUE, NAME or PREFIX*",
    Allow: "a host pattern or a set of hosts (@pypi)",
    Mapping: "NAME=ADDRESS",
);

/// Reads a value of `T` from a string or a whole number, by `T`'s `FromStr`.
struct Parsed<T>(&'static str, PhantomData<T>);

impl<T: FromStr> Visitor<'_> for Parsed<T>
where
    T::Err: fmt::Display,
{
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<T, E> {
        text.parse().map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<T, E> {
        self.visit_str(&n.to_string())
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<T, E> {
        self.visit_str(&n.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_whole_and_not_zero() {
        assert_eq!(
            "30".parse::<Secs>().unwrap().duration(),
            Duration::from_secs(30)
        );
        assert!(matches!("0".parse::<Secs>(), Err(ValueError::NoTime)));
        assert!(matches!(
            "1.5".parse::<Secs>(),
            Err(ValueError::NotNumber(_))
        ));
        assert_eq!("2".parse::<Mib>().unwrap().bytes(), 2 << 20);
        assert!(matches!(
            "0".parse::<Processes>(),
            Err(ValueError::NoProcesses)
        ));
        assert!("4294967296".parse::<Processes>().is_err());
    }

    #[test]
    fn variables_are_names_and_not_the_sandboxs_own() {
        assert_eq!(
            "A=1=2".parse::<Variable>().unwrap(),
            Variable::Set("A".into(), "1=2".into())
        );
        assert_eq!(
            "GITHUB_*".parse::<Variable>().unwrap(),
            Variable::Prefix("GITHUB_".into())
        );
        assert_eq!(
            "*".parse::<Variable>().unwrap(),
            Variable::Prefix(String::new())
        );
        assert!(matches!(
            "PATH=/x".parse::<Variable>(),
            Err(ValueError::Reserved)
        ));
        assert!(matches!("1X".parse::<Variable>(), Err(ValueError::Name)));
        assert!(matches!("".parse::<Variable>(), Err(ValueError::Name)));
    }

    #[test]
    fn a_set_stands_for_its_hosts() {
        let set = "@crates".parse::<Allow>().unwrap();
        let hosts: Vec<String> = set.patterns().iter().map(|p| p.to_string()).collect();
        assert_eq!(hosts, ["crates.io", "index.crates.io", "static.crates.io"]);
        let error = "@pip".parse::<Allow>().unwrap_err().to_string();
        assert!(
            error.starts_with("\"@pip\" is not a set of hosts; the sets are @pypi, @npm, "),
            "{error}"
        );
        let error = "*".parse::<Allow>().unwrap_err().to_string();
        assert!(error.contains("would allow every host"), "{error}");
    }
}
