//! Tests of schema.rs: each key honoured, refused or ignored by name; the
//! task guide's table of keys is [`KEYS`]'s; and, with Harbor's own
//! `TaskConfig` (the `harbor` wheel in `$ONEBASH_HARBOR_PYTHON`, which
//! .ci/run installs), no field of Harbor's model is left out and Harbor
//! and onebash read the fixtures alike.

use std::process::Command;

use super::*;
use crate::task::harbor::TaskToml;

/// task.toml fixtures: the text, and what onebash makes of it: `Ok(keys)`
/// with the keys it refuses (empty: it runs), or `Err(text)` of what
/// Harbor rejects too.
const FIXTURES: &[(&str, Result<&[&str], &str>)] = &[
    ("", Ok(&[])),
    // Defaults written out are not refused.
    (
        "schema_version = \"1.4\"\n[environment]\nos = \"Linux\"\nnetwork_mode = \"public\"\ngpus = 0\nstorage_mb = 10240\nenv = {}\nmcp_servers = []\n[verifier]\nenvironment_mode = \"shared\"\ncollect = []\n[agent]\nnetwork_mode = \"public\"\n[solution]\nenv = {}\n",
        Ok(&[]),
    ),
    (
        "version = \"1.0\"\n[task]\nname = \"acme/copy\"\nauthors = [{ name = \"A\" }]\n[metadata]\nx = 1\n[verifier]\ntimeout_sec = 120\nenv = { MODE = \"fast\" }\n[agent]\ntimeout_sec = 300.0\n[environment]\nbuild_timeout_sec = 60\ncpus = 2.0\nmemory = \"2G\"\nallow_internet = false\n",
        Ok(&[]),
    ),
    // The five keys issue 38 found read past.
    ("[environment]\nos = \"windows\"\n", Ok(&["environment.os"])),
    (
        "[[steps]]\nname = \"one\"\n[[steps]]\nname = \"two\"\n",
        Ok(&["steps"]),
    ),
    ("[verifier]\nenvironment_mode = \"separate\"\n", Ok(&[])),
    (
        "artifacts = [\"/app/out.txt\", { source = \"/app/d\", exclude = [\"*.log\"] }]\n",
        Ok(&[]),
    ),
    (
        "[agent]\nnetwork_mode = \"no-network\"\n",
        Ok(&["agent.network_mode"]),
    ),
    // Phases of their own: no-network and allowlist switch, public does not.
    (
        "[environment]\nnetwork_mode = \"no-network\"\n[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\", \"*.pythonhosted.org\", \"10.0.0.0/8\"]\n",
        Ok(&[]),
    ),
    (
        "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"b.org\"]\n",
        Ok(&[]),
    ),
    (
        "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"a.org\"]\n[verifier]\nnetwork_mode = \"public\"\n",
        Ok(&["verifier.network_mode"]),
    ),
    // Users, the workdir, variables, the healthcheck: honoured.
    (
        "[verifier]\nuser = \"tester\"\n[verifier.environment]\ndocker_image = \"x\"\n[[verifier.collect]]\ncommand = \"true\"\n",
        Ok(&[]),
    ),
    (
        "[agent]\nuser = 1000\n[environment]\nworkdir = \"/w\"\nenv = { A = \"b\" }\n[environment.healthcheck]\ncommand = \"true\"\nretries = 2\ninterval_sec = 0.5\n[solution]\nenv = { K = \"v\" }\n",
        Ok(&[]),
    ),
    // The rest of what onebash cannot honour.
    (
        "[environment]\nskills_dir = \"/s\"\ngpus = 1\n[[environment.mcp_servers]]\nname = \"m\"\nurl = \"http://x\"\n",
        Ok(&[
            "environment.skills_dir",
            "environment.gpus",
            "environment.mcp_servers",
        ]),
    ),
    (
        "[environment]\nenv = { TOKEN = \"${HOST_TOKEN:-x}\" }\n[solution]\nenv = { K = \"${K}\" }\n",
        Ok(&["environment.env.TOKEN", "solution.env.K"]),
    ),
    (
        "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n",
        Ok(&[]),
    ),
    (
        "[verifier]\nenv = { KEY = \"${OPENAI_API_KEY}\" }\n",
        Ok(&["verifier.env.KEY"]),
    ),
    // What Harbor rejects.
    (
        "[verifier]\ntimeout_sec = \"long\"\n",
        Err("`verifier.timeout_sec` must be a number of seconds"),
    ),
    (
        "[environment]\nos = \"macos\"\n",
        Err("`environment.os` must be one of"),
    ),
    (
        "[environment]\nallowed_hosts = [\"x.org\"]\n",
        Err("`environment.allowed_hosts` is only valid"),
    ),
    (
        "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"https://x.org/\"]\n",
        Err("`environment.allowed_hosts`: allowed host"),
    ),
    (
        "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"x.*.org\"]\n",
        Err("`agent.allowed_hosts`: allowed host"),
    ),
    (
        "[verifier]\nenvironment_mode = \"shared\"\n[verifier.environment]\n",
        Err("incompatible"),
    ),
    (
        "[task]\nname = \"nameless\"\n",
        Err("`task.name` must be `org/name`"),
    ),
    (
        "[environment]\nmemory = \"1G\"\nmemory_mb = 512\n",
        Err("disagree"),
    ),
    (
        "[environment]\nmemory_mb = 1.5\n",
        Err("must be an integer"),
    ),
];

#[test]
fn every_key_is_honoured_refused_or_ignored_by_name() {
    for (text, expected) in FIXTURES {
        let table: toml::Table = toml::from_str(text).expect(text);
        match (check(&table), expected) {
            (Ok(checked), Ok(keys)) => {
                for key in *keys {
                    assert!(
                        checked
                            .refused
                            .iter()
                            .any(|r| r.starts_with(&format!("`{key}`"))),
                        "{text}: {key} not refused: {:?}",
                        checked.refused
                    );
                }
                assert_eq!(
                    checked.refused.len(),
                    keys.len(),
                    "{text}: {:?}",
                    checked.refused
                );
                assert!(checked.unknown.is_empty(), "{text}: {:?}", checked.unknown);
            }
            (Err(message), Err(part)) => assert!(message.contains(part), "{text}: {message}"),
            (got, _) => panic!("{text}: {got:?}, expected {expected:?}"),
        }
    }
    // A key Harbor does not read is told, not refused; free tables hold
    // anything.
    let table: toml::Table = toml::from_str(
        "colour = 1\n[metadata]\nanything = { a = 1 }\n[environment]\nflavour = \"x\"\n",
    )
    .expect("toml");
    let checked = check(&table).expect("valid");
    assert_eq!(checked.unknown, ["colour", "environment.flavour"]);
    assert!(checked.refused.is_empty());
    // The network: Harbor's default, the old spelling, and the written.
    let network = |text: &str| {
        let table: toml::Table = toml::from_str(text).expect("toml");
        let checked = check(&table).expect("valid");
        (checked.network, checked.network_written)
    };
    assert_eq!(network(""), (Some(Network::Public), false));
    // A phase of its own: the agent's hosts, and none for the verifier.
    let table: toml::Table = toml::from_str(
        "[environment]\nnetwork_mode = \"no-network\"\n[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"PyPI.org.\"]\n",
    )
    .expect("toml");
    let checked = check(&table).expect("valid");
    assert_eq!(checked.network, Some(Network::Allowlist));
    assert_eq!(
        checked.hosts,
        Some(PhaseHosts {
            agent: AllowedHosts::parse(&["pypi.org"]).expect("hosts"),
            verifier: AllowedHosts::default(),
        })
    );
    assert_eq!(
        network("[environment]\nallow_internet = false\n"),
        (Some(Network::None), true)
    );
    assert_eq!(
        network(
            "[environment]\nnetwork_mode = \"no-network\"\n[verifier]\nnetwork_mode = \"no-network\"\n"
        ),
        (Some(Network::None), true)
    );
    assert_eq!(size_mb("1.5g"), Some(1536));
    assert_eq!(size_mb("512K"), Some(0));
    assert_eq!(size_mb("12"), None);
}

/// The task guide's table of keys, as [`KEYS`] makes it.
fn guide_table() -> String {
    let mut table = String::from("| key | Harbor's default | onebash |\n|---|---|---|\n");
    for key in KEYS {
        let does = match &key.does {
            Does::Honours(how) => format!("honoured: {how}"),
            Does::Ignores(why) => format!("read, no effect: {why}"),
            Does::Refuses { why, .. } => format!("refused unless the default: {why}"),
        };
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            key.path,
            key.default.replace('|', "\\|"),
            does.replace('|', "\\|")
        ));
    }
    table
}

#[test]
fn the_task_guide_lists_every_key_as_the_table_says() {
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/tasks.md"))
        .expect("docs/tasks.md");
    let (start, end) = ("<!-- harbor-keys -->\n", "<!-- /harbor-keys -->");
    let inside = guide
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once(end))
        .map(|(inside, _)| inside);
    let expected = guide_table();
    assert_eq!(
        inside,
        Some(expected.as_str()),
        "docs/tasks.md's Harbor keys, between {start:?} and {end:?}, must read:\n{expected}"
    );
}

/// The python with Harbor's wheel: `$ONEBASH_HARBOR_PYTHON`; without it
/// the test is skipped with a note, unless CI is set (.ci/run installs
/// it).
fn harbor_python() -> Option<String> {
    let python = std::env::var("ONEBASH_HARBOR_PYTHON").ok();
    let found = python.as_ref().is_some_and(|python| {
        Command::new(python)
            .args(["-c", "import harbor.models.task.config"])
            .output()
            .is_ok_and(|out| out.status.success())
    });
    assert!(
        found || std::env::var_os("CI").is_none(),
        "Harbor's TaskConfig is missing, but CI is set: .ci/run must install it (ONEBASH_HARBOR_PYTHON)"
    );
    if !found {
        eprintln!(
            "skipped: Harbor's TaskConfig (set ONEBASH_HARBOR_PYTHON to a python with the harbor wheel; see .ci/run)"
        );
    }
    found.then(|| python.unwrap_or_default())
}

fn script() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/harbor_taskconfig.py")
}

#[test]
fn every_field_of_harbors_model_is_honoured_refused_or_ignored() {
    let Some(python) = harbor_python() else {
        return;
    };
    let out = Command::new(&python)
        .args([script(), "fields"])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields: Vec<String> = serde_json::from_slice(&out.stdout).expect("a JSON list");
    assert!(fields.len() > 40, "{fields:?}");
    let missing: Vec<&String> = fields.iter().filter(|f| covering(f).is_none()).collect();
    assert!(
        missing.is_empty(),
        "fields of Harbor's TaskConfig onebash neither honours nor refuses: {missing:?}"
    );
}

#[test]
fn harbors_taskconfig_and_onebash_read_the_fixtures_alike() {
    let Some(python) = harbor_python() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let paths: Vec<String> = FIXTURES
        .iter()
        .enumerate()
        .map(|(i, (text, _))| {
            let path = dir.path().join(format!("{i}.toml"));
            std::fs::write(&path, text).expect("write");
            path.display().to_string()
        })
        .collect();
    let out = Command::new(&python)
        .arg(script())
        .arg("parse")
        .args(&paths)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let harbor: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect();
    assert_eq!(harbor.len(), FIXTURES.len());
    for ((text, _), theirs) in FIXTURES.iter().zip(&harbor) {
        let ours = TaskToml::parse(text);
        if theirs["ok"] != true {
            // What Harbor rejects, onebash rejects or refuses: it never runs.
            if let Ok(ours) = ours {
                assert!(!ours.checked.refused.is_empty(), "{text}: Harbor: {theirs}");
            }
            continue;
        }
        let Ok(ours) = ours else {
            panic!("{text}: Harbor reads it ({theirs}), onebash rejects it");
        };
        let number = |key: &str| theirs[key].as_f64();
        assert_eq!(
            Some(ours.verifier_timeout_s),
            number("verifier_timeout_sec"),
            "{text}"
        );
        assert_eq!(ours.agent_timeout_s, number("agent_timeout_sec"), "{text}");
        assert_eq!(
            Some(ours.build_timeout_s),
            number("build_timeout_sec"),
            "{text}"
        );
        assert_eq!(ours.cpus, number("cpus"), "{text}");
        assert_eq!(ours.memory_mb, theirs["memory_mb"].as_u64(), "{text}");
        assert_eq!(
            ours.docker_image.as_deref(),
            theirs["docker_image"].as_str(),
            "{text}"
        );
        let env: Vec<(String, String)> = theirs["verifier_env"]
            .as_object()
            .map(|env| {
                env.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(ours.verifier_env, env, "{text}");
        networks_alike(text, &ours, theirs);
        runtime_alike(text, theirs);
    }
}

/// Each phase's network and hosts, as schema.rs reads them and Harbor's
/// trial resolves them.
fn networks_alike(text: &str, ours: &TaskToml, theirs: &serde_json::Value) {
    // Each phase's network as Harbor's trial resolves it: public, none,
    // or the proxy (an allowlist; none of it for a `no-network` phase).
    for phase in ["agent", "verifier"] {
        let mode = theirs["phase_networks"][phase][0].as_str().unwrap_or("");
        let expected: &[&str] = match ours.checked.network {
            Some(Network::Public) => &["public"],
            Some(Network::None) => &["no-network"],
            Some(Network::Allowlist) => &["allowlist", "no-network"],
            // Refused: public in one phase only.
            None => &["public", "allowlist", "no-network"],
        };
        assert!(expected.contains(&mode), "{text}: {phase} is {mode}");
    }
    // Each phase's hosts, as Harbor resolves and normalises them.
    if let Some(hosts) = &ours.checked.hosts {
        for (phase, ours) in [("agent", &hosts.agent), ("verifier", &hosts.verifier)] {
            let theirs: Vec<String> = theirs["phase_networks"][phase][1]
                .as_array()
                .map(|h| {
                    h.iter()
                        .filter_map(|h| h.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let theirs = crate::task::AllowedHosts::parse(&theirs).expect("Harbor's hosts");
            assert_eq!(*ours, theirs, "{text}: {phase}");
        }
    }
}

/// The container's variables, workdir and users, `[solution] env` and
/// the healthcheck, as runtime.rs reads them and Harbor's model does.
fn runtime_alike(text: &str, theirs: &serde_json::Value) {
    let table: toml::Table = toml::from_str(text).expect("toml");
    let ours = crate::task::harbor::runtime::read(&table).expect(text);
    let pairs = |value: &serde_json::Value| -> Vec<(String, String)> {
        value
            .as_object()
            .map(|env| {
                env.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let user = |value: &serde_json::Value| match value {
        serde_json::Value::String(name) => Some(name.clone()),
        serde_json::Value::Number(uid) => Some(uid.to_string()),
        _ => None,
    };
    assert_eq!(ours.setup.env, pairs(&theirs["env"]), "{text}");
    assert_eq!(ours.solution_env, pairs(&theirs["solution_env"]), "{text}");
    assert_eq!(
        ours.setup.workdir.as_deref(),
        theirs["workdir"].as_str(),
        "{text}"
    );
    assert_eq!(ours.setup.agent_user, user(&theirs["agent_user"]), "{text}");
    assert_eq!(
        ours.setup.verifier_user,
        user(&theirs["verifier_user"]),
        "{text}"
    );
    let check = &theirs["healthcheck"];
    assert_eq!(ours.healthcheck.is_some(), !check.is_null(), "{text}");
    if let Some(script) = &ours.healthcheck {
        let command = check["command"].as_str().unwrap_or_default();
        let retries = check["retries"].as_i64().unwrap_or_default();
        let interval = check["interval_sec"].as_f64().unwrap_or_default();
        assert!(
            script.contains(&format!("-ge {retries} ]"))
                && script.contains(&format!("\n  sleep {interval}\n"))
                && script.contains(&format!(
                    "healthcheck failed after {retries} consecutive retries: {command}"
                )),
            "{text}: {script}"
        );
    }
}
