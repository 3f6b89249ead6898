//! Named sets of hosts (`--allow-domain @pypi`): the hosts a package registry or a forge
//! serves from, so that the user need not know that pip also downloads from
//! files.pythonhosted.org. A refusal of a host of a set names the set too.

/// Each set: its name (given as `@name`) and its hosts, reached on ports 80 and 443.
pub const SETS: [(&str, &[&str]); 7] = [
    ("pypi", &["pypi.org", "files.pythonhosted.org"]),
    ("npm", &["registry.npmjs.org"]),
    (
        "crates",
        &["crates.io", "index.crates.io", "static.crates.io"],
    ),
    ("go", &["proxy.golang.org", "sum.golang.org"]),
    (
        "github",
        &[
            "github.com",
            "api.github.com",
            "codeload.github.com",
            "objects.githubusercontent.com",
            "raw.githubusercontent.com",
        ],
    ),
    ("rubygems", &["rubygems.org", "index.rubygems.org"]),
    ("maven", &["repo.maven.apache.org", "repo1.maven.org"]),
];

/// The hosts of the set `name` (without its `@`).
pub fn hosts(name: &str) -> Option<&'static [&'static str]> {
    SETS.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, hosts)| *hosts)
}

/// The name of the set `host` (a name, lowercase) belongs to, if any.
pub fn of(host: &str) -> Option<&'static str> {
    SETS.iter()
        .find(|(_, hosts)| hosts.contains(&host))
        .map(|(name, _)| *name)
}

/// The names of the sets, each with its `@`, joined for a message.
pub fn names() -> String {
    let names: Vec<String> = SETS.iter().map(|(n, _)| format!("@{n}")).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_found_by_name_and_by_host() {
        assert_eq!(
            hosts("pypi"),
            Some(&["pypi.org", "files.pythonhosted.org"][..])
        );
        assert_eq!(hosts("nope"), None);
        assert_eq!(of("static.crates.io"), Some("crates"));
        assert_eq!(of("example.org"), None);
        assert!(names().starts_with("@pypi, @npm, @crates, @go, @github"));
    }
}
