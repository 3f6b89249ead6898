//! Egress by name: bash commands reach the hosts of `--allow-domain` through cordon's proxy,
//! and nothing else; a refusal is a line of the output that names the option. The servers
//! are the test's own, on 127.0.0.1 only; `--add-host` maps test names to them.

use serde_json::json;

use crate::util::{Cordon, Server};

fn bash(c: &Cordon, command: &str) -> String {
    let run = c.call("bash", json!({ "command": command }));
    assert!(run.stderr.is_empty() || run.code == 0, "{run:?}");
    run.stdout
}

#[test]
fn an_allowed_host_and_port_is_reached_by_curl_and_python_and_nothing_else_is() {
    let (allowed, other) = (Server::start(), Server::start());
    let (p, q) = (allowed.port, other.port);
    let c = Cordon::new().with_args(&[
        "--add-host",
        "pkg.test=127.0.0.1",
        "--add-host",
        "other.test=127.0.0.1",
        "--allow-domain",
        &format!("pkg.test:{p}"),
    ]);
    let out = bash(
        &c,
        &format!(
            "curl -sS http://pkg.test:{p}/curl; curl -sS -p http://pkg.test:{p}/tunnel; \
             python3 -c 'import urllib.request as u; \
             print(u.urlopen(\"http://pkg.test:{p}/python\").read().decode(), end=\"\")'"
        ),
    );
    assert_eq!(
        out, "served /curl\nserved /tunnel\nserved /python\n",
        "{out}"
    );
    // The absolute-form request reached the server in origin form, closed after one answer.
    let heads = allowed.heads();
    assert!(heads[0].starts_with("GET /curl HTTP/1.1\r\n"), "{heads:?}");
    assert!(heads[0].contains("Connection: close"), "{heads:?}");

    let out = bash(
        &c,
        &format!(
            "curl -sS -o /dev/null https://pkg.test:{q}/; \
             curl -sS http://other.test:{p}/; \
             curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{q}/direct; echo direct=$?; \
             python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\
             .sendto(b\"x\", (\"8.8.8.8\", 53))' 2>&1 | tail -1; \
             getent hosts example.com; echo dns=$?"
        ),
    );
    let port_line =
        format!("[network: blocked pkg.test:{q}; allow it with --allow-domain pkg.test:{q}]");
    let name_line =
        format!("[network: blocked other.test:{p}; allow it with --allow-domain other.test:{p}]");
    assert!(out.contains("CONNECT tunnel failed, response 403"), "{out}");
    assert_eq!(out.matches(&port_line).count(), 1, "{out}");
    assert_eq!(out.matches(&name_line).count(), 1, "{out}");
    assert!(out.contains("direct=7"), "{out}");
    assert!(out.contains("Network is unreachable"), "{out}");
    assert!(out.contains("dns=2"), "{out}");
    assert!(other.heads().is_empty(), "{:?}", other.heads());
    assert_eq!(allowed.heads().len(), 3);
}

#[test]
fn a_name_that_resolves_to_loopback_is_refused_unless_its_address_is_allowed() {
    let server = Server::start();
    let p = server.port;
    // A name of this machine's /etc/hosts, as DNS might answer one: not `localhost`, which
    // a rule may name as such.
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    let name = hosts
        .lines()
        .filter_map(|l| l.strip_prefix("127.0.0.1"))
        .flat_map(str::split_whitespace)
        .find(|n| !n.starts_with("localhost"))
        .expect("a name for 127.0.0.1 besides localhost in /etc/hosts");
    let url = format!("http://{name}:{p}/inner");
    let refused = Cordon::new().with_args(&["--allow-domain", &format!("{name}:{p}")]);
    let out = bash(
        &refused,
        &format!("curl -sS -o /dev/null -w '%{{http_code}}\\n' {url}"),
    );
    assert!(out.starts_with("403\n"), "{out}");
    assert!(
        out.contains(&format!(
            "[network: blocked {name}:{p}: it resolves to 127.0.0.1, a loopback address; allow \
             that address with --allow-domain 127.0.0.1:{p}]"
        )),
        "{out}"
    );
    assert!(server.heads().is_empty());

    let allowed = Cordon::new().with_args(&[
        "--allow-domain",
        &format!("{name}:{p}"),
        "--allow-domain",
        &format!("127.0.0.1:{p}"),
    ]);
    assert_eq!(
        bash(&allowed, &format!("curl -sS {url}")),
        "served /inner\n"
    );
}

#[test]
fn the_session_names_what_was_blocked_and_doctor_shows_the_policy() {
    let c = Cordon::new().with_args(&["--allow-domain", "pypi.org"]);
    let answers = c.session(format!(
        "{}\n",
        json!({"tool": "bash", "input": {"command": "curl -sS -o /dev/null https://blocked.test/"}})
    ));
    let sandbox = &answers[0]["sandbox"];
    assert_eq!(
        sandbox["blocked"],
        json!(["blocked.test:443"]),
        "{answers:?}"
    );
    assert!(
        sandbox["enforced"]
            .as_array()
            .unwrap()
            .contains(&json!("network"))
    );

    let doctor = c.run(&["doctor"]);
    assert_eq!(doctor.code, 0, "{doctor:?}");
    let network = doctor
        .stdout
        .lines()
        .find(|l| l.contains("network"))
        .unwrap();
    assert!(network.contains("cordon's proxy"), "{network}");
    assert!(network.contains("pypi.org"), "{network}");
}

#[test]
fn the_config_file_adds_hosts_and_bad_patterns_or_an_unconfined_shell_are_refused() {
    let server = Server::start();
    let p = server.port;
    let user = tempfile::tempdir().unwrap();
    let config = user.path().join("config.toml");
    std::fs::write(
        &config,
        format!("[network]\nallow = [\"pkg.test:{p}\"]\nhosts = [\"pkg.test=127.0.0.1\"]\n"),
    )
    .unwrap();
    let c = Cordon::new().with_args(&["--config", config.to_str().unwrap()]);
    assert_eq!(
        bash(&c, &format!("curl -sS http://pkg.test:{p}/config")),
        "served /config\n"
    );

    let everything = Cordon::new().with_args(&["--allow-domain", "*"]);
    let run = everything.call("bash", json!({"command": "true"}));
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("--bash-network"), "{run:?}");
    let unconfined = Cordon::new().with_args(&["--allow-domain", "pypi.org", "--unconfined-bash"]);
    let run = unconfined.call("bash", json!({"command": "true"}));
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains("--unconfined-bash"), "{run:?}");
}

#[test]
fn bash_network_still_opens_everything() {
    let server = Server::start();
    let c = Cordon::new().with_args(&["--bash-network", "--allow-domain", "pypi.org"]);
    let out = bash(
        &c,
        &format!(
            "echo proxy=${{HTTPS_PROXY:-none}}; curl -sS http://127.0.0.1:{}/open",
            server.port
        ),
    );
    assert_eq!(out, "proxy=none\nserved /open\n");
}

#[test]
fn in_ask_mode_a_host_off_the_list_is_asked_for_and_the_answer_is_honoured() {
    let server = Server::start();
    let p = server.port;
    let c = Cordon::new().with_args(&[
        "--permissions",
        "ask",
        "--add-host",
        "pkg.test=127.0.0.1",
        "--add-host",
        "nope.test=127.0.0.1",
        "--allow-domain",
        "pypi.org",
    ]);
    let call = |id: u32, command: String| {
        json!({"id": id, "tool": "bash", "input": {"command": command}}).to_string()
    };
    let answer = |id: &str| json!({ "permission": id }).to_string();
    let lines = [
        call(
            1,
            format!("curl -sS http://pkg.test:{p}/asked; curl -sS http://pkg.test:{p}/again"),
        ),
        answer("allow_once"),
        answer("allow_always"),
        call(2, format!("curl -sS http://pkg.test:{p}/remembered")),
        answer("allow_once"),
        call(3, format!("curl -sS http://nope.test:{p}/refused")),
        answer("allow_once"),
        answer("reject_once"),
    ];
    let answers = c.session(lines.join("\n") + "\n");
    let titles: Vec<&str> = answers
        .iter()
        .filter_map(|a| a["permission_request"]["title"].as_str())
        .collect();
    let network = format!("Connect to pkg.test:{p}");
    let refused = format!("Connect to nope.test:{p}");
    assert_eq!(
        titles.iter().filter(|t| **t == network).count(),
        1,
        "{titles:?}"
    );
    assert_eq!(
        titles.iter().filter(|t| **t == refused).count(),
        1,
        "{titles:?}"
    );
    let outputs: Vec<&str> = answers
        .iter()
        .filter_map(|a| a["output"].as_str())
        .collect();
    assert_eq!(outputs[0], "served /asked\nserved /again\n", "{answers:?}");
    assert_eq!(outputs[1], "served /remembered\n", "{answers:?}");
    assert!(
        outputs[2].contains(&format!("[network: blocked nope.test:{p}; allow it with")),
        "{answers:?}"
    );
    let paths: Vec<String> = server
        .heads()
        .iter()
        .map(|h| h.lines().next().unwrap().to_string())
        .collect();
    assert_eq!(paths.len(), 3, "{paths:?}");
}

/// `--allow-domain @pypi` allows the hosts of the set (here mapped to the test's own address,
/// where nothing of a registry is reached); a host of a set that is not allowed is refused
/// with a line that names the set too; an unknown set is a usage error that lists them.
#[test]
fn a_named_set_allows_its_hosts_and_a_refusal_names_the_set() {
    let c = Cordon::new().with_args(&[
        "--allow-domain",
        "@pypi",
        "--add-host",
        "files.pythonhosted.org=127.0.0.1",
        "--add-host",
        "crates.io=127.0.0.1",
    ]);
    let out = bash(
        &c,
        "curl -sS --max-time 5 http://files.pythonhosted.org/simple 2>&1; echo pypi=$?; \
         curl -sS --max-time 5 http://crates.io/ 2>&1; echo crates=$?",
    );
    assert!(
        !out.contains("[network: blocked files.pythonhosted.org"),
        "{out}"
    );
    assert!(
        out.contains(
            "[network: blocked crates.io:80; allow it with --allow-domain crates.io, or the \
             hosts of its set with --allow-domain @crates]"
        ),
        "{out}"
    );
    let tools = c.run(&["tools", "--json"]);
    assert!(
        tools
            .stdout
            .contains("use it): pypi.org, files.pythonhosted.org. Any other host is refused."),
        "{}",
        tools.stdout
    );

    let run = Cordon::new()
        .with_args(&["--allow-domain", "@pip"])
        .run(&["tools"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains(
            "\"@pip\" is not a set of hosts; the sets are @pypi, @npm, @crates, @go, @github"
        ),
        "{run:?}"
    );
}

/// With the network off, a client that honours the proxy variables is refused by cordon's
/// proxy at once, and the output ends with the host it asked for and the option (and set) that
/// would allow it; package managers are told not to try again.
#[test]
fn with_the_network_off_a_client_is_refused_at_once_and_told_the_way() {
    let c = Cordon::new();
    let out = bash(
        &c,
        "curl -sS https://pypi.org/simple/six/; echo curl=$?; \
         git clone -q https://github.com/example/project.git 2>&1 | tail -1; \
         echo $PIP_RETRIES $npm_config_fetch_retries $CARGO_NET_RETRY",
    );
    assert!(out.contains("CONNECT tunnel failed, response 403"), "{out}");
    assert!(out.contains("curl=56"), "{out}");
    assert!(out.contains("0 0 0\n"), "{out}");
    for line in [
        "[network: blocked pypi.org:443; allow it with --allow-domain pypi.org, or the hosts of \
         its set with --allow-domain @pypi]",
        "[network: blocked github.com:443; allow it with --allow-domain github.com, or the hosts \
         of its set with --allow-domain @github]",
    ] {
        assert_eq!(out.matches(line).count(), 1, "{line}\n{out}");
    }
}
