//! SWE-bench's verdicts, checked against the `swebench` package itself:
//! recorded eval logs of every log parser the package names (the Python
//! repos' oracle, noop and partial runs in tests/fixtures/swebench-logs/,
//! the Multilingual and JavaScript repos' in its `multilingual/`, each
//! graded with full, partial and no-fix test lists) go through onebash's
//! parser and grading and through the package's `MAP_REPO_TO_PARSER`,
//! `get_logs_eval`, `get_eval_tests_report`, `get_resolution_status` and
//! `get_eval_report`; statuses and verdicts must be the same. And the
//! eval script of every repo and version is the package's.

use std::path::{Path, PathBuf};
use std::process::Command;

use onebash::grade::swebench::spec::{Instance, eval_for, image_name, package_script, specs};
use onebash::grade::swebench::{
    Parser, Rules, StatusMap, grade_output, instance_report, parser_for_5, record_test_exit_code,
};
use serde_json::{Value, json};

use crate::support::backend::{Backend, ImageTags, under_each_backend};
use crate::support::harness::{fixture_script, swebench_python, swebench5_python};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/swebench-logs")
}

/// The cases of both cases.json, their log paths made absolute.
fn cases() -> Vec<Value> {
    let mut all = Vec::new();
    for dir in [fixtures(), fixtures().join("multilingual")] {
        let text = std::fs::read_to_string(dir.join("cases.json")).expect("cases.json");
        let mut cases: Vec<Value> = serde_json::from_str(&text).expect("a JSON list");
        for case in &mut cases {
            let log = dir.join(case["log"].as_str().expect("log"));
            case["log_path"] = json!(log.display().to_string());
        }
        all.extend(cases);
    }
    all
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

/// What the package makes of `cases` (swebench_grade.py's answer).
fn package_grades(python: &str, cases: &[Value]) -> Value {
    package_answer(python, "swebench_grade.py", cases)
}

/// The JSON a fixture script prints for `input`, given in a file.
fn package_answer(python: &str, script: &str, input: &[Value]) -> Value {
    let dir = tempfile::tempdir().expect("tempdir");
    let input_path = dir.path().join("input.json");
    std::fs::write(&input_path, serde_json::to_vec(input).expect("json")).expect("write");
    let script = format!("swebench-logs/{script}");
    let output = fixture_script(python, &script, [&input_path]);
    serde_json::from_str(&output).expect("the script's JSON")
}

/// onebash's reading of one case: statuses, resolution, resolved.
fn onebash(case: &Value) -> (StatusMap, String, bool) {
    let repo = case["repo"].as_str().expect("repo");
    let version = case["version"].as_str().expect("version");
    let instance = Instance {
        instance_id: case["instance_id"].as_str().expect("instance_id"),
        repo,
        version,
        base_commit: "",
        test_patch: "",
    };
    let eval = eval_for(&instance).unwrap_or_else(|err| panic!("{repo}: {err}"));
    let log = std::fs::read_to_string(case["log_path"].as_str().expect("path")).expect("log");
    let graded = grade_output(
        Rules::Swebench41,
        eval.parser,
        eval.fail_only,
        &log,
        &strings(&case["FAIL_TO_PASS"]),
        &strings(&case["PASS_TO_PASS"]),
    );
    let resolution = serde_json::to_value(graded.verdict.resolution).expect("serializes");
    (
        graded.statuses,
        resolution.as_str().unwrap_or_default().to_owned(),
        graded.verdict.resolved,
    )
}

#[test]
fn recorded_logs_grade_as_the_fixtures_say() {
    // Runs without the package too: oracle RESOLVED_FULL, noop
    // RESOLVED_NO, partial RESOLVED_PARTIAL.
    let wrong: Vec<String> = cases()
        .iter()
        .filter_map(|case| {
            // The odd-lines log only checks statuses against the package.
            let expected = case["expect"].as_str()?;
            let (_, resolution, resolved) = onebash(case);
            (resolution != expected || resolved != (expected == "RESOLVED_FULL"))
                .then(|| format!("{}: {resolution} (expected {expected})", case["name"]))
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn recorded_logs_grade_as_the_swebench_package_grades_them() {
    let Some(python) = swebench_python() else {
        return;
    };
    let cases = cases();
    let theirs = package_grades(&python, &cases);
    assert_eq!(
        theirs["swebench"].as_str(),
        Some(
            onebash::grade::swebench::spec::specs()
                .swebench_version
                .as_str()
        ),
        "the package is not the version the data was generated from"
    );
    let mut wrong = Vec::new();
    for (case, theirs) in cases
        .iter()
        .zip(theirs["results"].as_array().expect("results"))
    {
        let (statuses, resolution, resolved) = onebash(case);
        let their_statuses: StatusMap =
            serde_json::from_value(theirs["statuses"].clone()).expect("a status map");
        if statuses != their_statuses {
            wrong.push(format!(
                "{}: statuses\n  onebash: {statuses:?}\n  swebench: {their_statuses:?}",
                case["name"]
            ));
        }
        if resolution != theirs["resolution"] || resolved != theirs["resolved"] {
            wrong.push(format!(
                "{}: onebash {resolution} resolved={resolved}, swebench {} resolved={}",
                case["name"], theirs["resolution"], theirs["resolved"]
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every parser the package has, by its function's name (jekyll's and
/// immutable-js's are the ones they call).
const PARSERS: [&str; 32] = [
    "parse_log_pytest",
    "parse_log_pytest_options",
    "parse_log_pytest_v2",
    "parse_log_django",
    "parse_log_seaborn",
    "parse_log_sympy",
    "parse_log_matplotlib",
    "parse_log_calypso",
    "parse_log_chart_js",
    "parse_log_marked",
    "parse_log_p5js",
    "parse_log_react_pdf",
    "parse_log_jest",
    "parse_log_jest_json",
    "parse_log_vitest",
    "parse_log_karma",
    "parse_log_tap",
    "parse_log_maven",
    "parse_log_ant",
    "parse_log_gradle_custom",
    "parse_log_gotest",
    "parse_log_cargo",
    "parse_log_phpunit",
    "parse_log_redis",
    "parse_log_jq",
    "parse_log_doctest",
    "parse_log_micropython_test",
    "parse_log_googletest",
    "parse_log_minitest",
    "parse_log_cucumber",
    "parse_log_ruby_unit",
    "parse_log_rspec_transformed_json",
];

#[test]
fn every_parser_reads_every_recorded_log_as_the_package_does() {
    // Each parser on every other runner's log too: lines it was not
    // written for are where a mirror drifts.
    let Some(python) = swebench_python() else {
        return;
    };
    let mut logs: Vec<String> = cases()
        .iter()
        .map(|case| case["log_path"].as_str().expect("path").to_owned())
        .collect();
    logs.dedup();
    let pairs: Vec<Value> = PARSERS
        .iter()
        .flat_map(|name| logs.iter().map(move |log| json!([name, log])))
        .collect();
    let theirs = package_answer(&python, "swebench_parse.py", &pairs);
    let (mut wrong, mut raised) = (Vec::new(), 0);
    for (pair, theirs) in pairs.iter().zip(theirs["maps"].as_array().expect("maps")) {
        let (name, path) = (
            pair[0].as_str().expect("name"),
            pair[1].as_str().expect("path"),
        );
        if theirs.get("raised").is_some() {
            // The package raises on this log: no map to compare.
            raised += 1;
            continue;
        }
        let parser = Parser::from_name(name).unwrap_or_else(|| panic!("{name}"));
        let log = std::fs::read_to_string(path).expect("log");
        let ours = parser.parse(&log);
        let theirs: StatusMap = serde_json::from_value(theirs.clone()).expect("a status map");
        if ours != theirs {
            wrong.push(format!(
                "{name} on {path}:\n  onebash: {ours:?}\n  swebench: {theirs:?}"
            ));
        }
    }
    assert!(pairs.len() > 1000, "{}", pairs.len());
    // A handful of pairs raise there (calypso's and doctest's on foreign
    // logs); most must be compared.
    assert!(
        raised * 10 < pairs.len(),
        "{raised} of {} raised",
        pairs.len()
    );
    assert!(
        wrong.is_empty(),
        "{} differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A test patch as SWE-bench's instances hold them, with paths shaped
/// for `language`: a changed test (one of whose removed lines reads like
/// a file header), a new one, a deleted one and a data file. wp-calypso's
/// has its package, snapshot and e2e paths.
fn realistic_test_patch(repo: &str, language: &str) -> String {
    let (changed, added, deleted, data) = match language {
        "py" => (
            "tests/test_api.py",
            "tests/test_new.py",
            "tests/test_old.py",
            "tests/data/in.json",
        ),
        "js" if repo == "Automattic/wp-calypso" => (
            "client/state/test/index.js",
            "packages/ui/src/__snapshots__/button.js.snap",
            "test/e2e/specs/login.js",
            "client/state/README.md",
        ),
        "js" => (
            "test/unit/api.test.js",
            "test/unit/new.test.ts",
            "test/old.spec.js",
            "test/fixtures/a.json",
        ),
        "rust" => (
            "tests/cli.rs",
            "src/tests/new.rs",
            "tests/old.rs",
            "tests/data/in.txt",
        ),
        "go" => (
            "router_test.go",
            "binding/new_test.go",
            "old_test.go",
            "testdata/a.json",
        ),
        "java" => (
            "src/test/java/com/x/ApiTest.java",
            "src/test/java/com/x/NewTest.java",
            "src/test/java/com/x/OldTest.java",
            "src/test/resources/a.json",
        ),
        "php" => (
            "tests/ApiTest.php",
            "tests/NewTest.php",
            "tests/OldTest.php",
            "tests/fixtures/a.json",
        ),
        "ruby" => (
            "test/test_api.rb",
            "spec/new_spec.rb",
            "test/test_old.rb",
            "test/fixtures/a.yml",
        ),
        _ => (
            "tests/unit/api.c",
            "tests/new.test",
            "tests/old.test",
            "tests/data.txt",
        ),
    };
    format!(
        "diff --git a/{changed} b/{changed}\nindex 1111111..2222222 100644\n--- a/{changed}\n+++ b/{changed}\n\
         @@ -1,3 +1,3 @@\n keep\n--- a/looks/like/a/header\n+new line\n keep\n\
         diff --git a/{added} b/{added}\nnew file mode 100644\nindex 0000000..3333333\n--- /dev/null\n+++ b/{added}\n\
         @@ -0,0 +1,2 @@\n+one\n+two\n\
         diff --git a/{deleted} b/{deleted}\ndeleted file mode 100644\nindex 4444444..0000000\n--- a/{deleted}\n+++ /dev/null\n\
         @@ -1 +0,0 @@\n-x\n\
         diff --git a/{data} b/{data}\nindex 5555555..6666666 100644\n--- a/{data}\n+++ b/{data}\n@@ -1 +1 @@\n-{{}}\n+[]\n"
    )
}

#[test]
fn eval_scripts_are_the_package_s_for_every_repo_and_version() {
    let Some(python) = swebench_python() else {
        return;
    };
    let specs = specs();
    let instances: Vec<Value> = specs
        .repos
        .iter()
        .flat_map(|(repo, entry)| {
            let patch = realistic_test_patch(repo, &entry.language);
            entry.versions.keys().map(move |version| {
                json!({
                    "instance_id": format!("{}-{version}", repo.replace('/', "__")),
                    "repo": repo,
                    "version": version,
                    "base_commit": "0123456789abcdef0123456789abcdef01234567",
                    "test_patch": patch,
                })
            })
        })
        .collect();
    let theirs = package_answer(&python, "swebench_scripts.py", &instances);
    assert_eq!(
        theirs["swebench"].as_str(),
        Some(specs.swebench_version.as_str())
    );
    let mut wrong = Vec::new();
    for (instance, theirs) in instances
        .iter()
        .zip(theirs["scripts"].as_array().expect("scripts"))
    {
        let field = |key: &str| instance[key].as_str().expect("a string");
        let ours = package_script(&Instance {
            instance_id: field("instance_id"),
            repo: field("repo"),
            version: field("version"),
            base_commit: field("base_commit"),
            test_patch: field("test_patch"),
        });
        match (ours, theirs.as_str()) {
            (Err(_), None) => {}
            (Ok(ours), Some(theirs)) if ours == theirs => {}
            (ours, theirs) => wrong.push(format!(
                "{}:\n--- onebash\n{}\n--- swebench\n{}",
                field("instance_id"),
                ours.unwrap_or_else(|err| err.to_string()),
                theirs.unwrap_or("(none)")
            )),
        }
    }
    assert!(instances.len() > 600, "{}", instances.len());
    assert!(
        wrong.is_empty(),
        "{} of {} differ; the first:\n{}",
        wrong.len(),
        instances.len(),
        wrong.first().map_or("", String::as_str)
    );
}

/// A django-shaped repo: SWE-bench's django recipe runs
/// `./tests/runtests.py --verbosity 2 ... MODULES`; this one runs
/// unittest on the modules it is given, as verbosely.
pub(crate) const RUNTESTS: &str = r#"#!/usr/bin/env python3
import configparser, os, sys, unittest
here = os.path.dirname(os.path.abspath(__file__))
# Its options from a file of the repo's, as pytest's from tox.ini: at 1,
# no line per test.
config = configparser.ConfigParser()
config.read(os.path.join(os.path.dirname(here), "setup.cfg"))
verbosity = config.getint("runtests", "verbosity", fallback=2)
sys.path[:0] = [here, os.path.dirname(here)]
args, labels = sys.argv[1:], []
while args:
    arg = args.pop(0)
    if arg in ("--verbosity", "--parallel"):
        args.pop(0)
    elif not arg.startswith("--"):
        labels.append(arg)
print("Testing against Django installed in '%s'" % here, file=sys.stderr)
suite = unittest.defaultTestLoader.loadTestsFromNames(labels)
result = unittest.TextTestRunner(verbosity=verbosity).run(suite)
sys.exit(not result.wasSuccessful())
"#;
pub(crate) const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";
pub(crate) const VISIBLE: &str = "import unittest\nfrom calc import sub\n\n\nclass CalcTests(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n";
pub(crate) const HIDDEN: &str = "import unittest\nfrom calc import add, mul, sub\n\n\nclass CalcTests(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n";

/// A django-shaped repo (calc.py, tests/runtests.py, the visible tests)
/// at its base commit (runtests.py committed as a program), held by
/// `mirrors` as django/django.git: under `--repo-base MIRRORS` an instance
/// of it is graded by SWE-bench's django 4.2 recipe, with no test command
/// given. `gold` fixes add() and mul(); the tests are unittest's names.
pub(crate) struct DjangoShaped {
    pub work: PathBuf,
    pub base: String,
    pub mirrors: PathBuf,
    pub gold: String,
    pub f2p: Vec<String>,
    pub p2p: Vec<String>,
}

impl DjangoShaped {
    pub(crate) fn new(fixture: &crate::support::harness::Fixture) -> DjangoShaped {
        use crate::support::harness::{diff_of, git, unittest_name};
        use std::os::unix::fs::PermissionsExt;
        let (work, first) = fixture.repo(
            "work",
            &[
                ("calc.py", CALC),
                ("tests/runtests.py", RUNTESTS),
                ("tests/calc_tests/__init__.py", ""),
                ("tests/calc_tests/tests.py", VISIBLE),
            ],
        );
        std::fs::set_permissions(
            work.join("tests/runtests.py"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        git(&work, &["add", "tests/runtests.py"]);
        git(&work, &["commit", "-q", "-m", "runtests is a program"]);
        let base = git(&work, &["rev-parse", "HEAD"]);
        assert_ne!(first, base);
        let mirrors = fixture.mirrors(&work, "django/django");
        let fixed = CALC.replacen("a - b", "a + b", 1).replacen(
            "a + b\n\n\ndef sub",
            "a * b\n\n\ndef sub",
            1,
        );
        let gold = diff_of(&work, &[("calc.py", &fixed)]);
        let name = |method: &str| unittest_name("calc_tests.tests.CalcTests", method);
        DjangoShaped {
            work,
            base,
            mirrors,
            gold,
            f2p: vec![name("test_add"), name("test_mul")],
            p2p: vec![name("test_sub")],
        }
    }

    /// An instance `id` of the repo at `version`, whose hidden tests are
    /// `hidden` (tests/calc_tests/tests.py).
    pub(crate) fn instance(&self, id: &str, version: &str, hidden: &str) -> Value {
        use crate::support::harness::diff_of;
        json!({
            "instance_id": id,
            "repo": "django/django",
            "base_commit": self.base,
            "problem_statement": format!("Problem of task {id}. add() subtracts and mul() adds."),
            "patch": self.gold,
            "test_patch": diff_of(&self.work, &[("tests/calc_tests/tests.py", hidden)]),
            "FAIL_TO_PASS": json!(self.f2p).to_string(),
            "PASS_TO_PASS": json!(self.p2p).to_string(),
            "version": version,
        })
    }
}

/// The scripted agent's whole fix: add() adds, mul() multiplies.
const FULL_FIX: &str = "sed -i '2s/a - b/a + b/; 6s/a + b/a * b/' calc.py";

#[test]
fn instances_run_swebench_s_recipe_and_get_the_package_s_verdicts() {
    django_instances_match_the_package(None);
}

/// A SWE-bench-shaped image, built on the container tests' image with no
/// registry: the repo at /testbed (at its base, as SWE-bench's images hold
/// it) and the testbed environment at /opt/miniconda3 (an `activate`
/// whose `conda activate testbed` puts its `python` first on PATH).
const SWEBENCH_SHAPED: &str = r#"FROM onebash-test/base:bookworm
COPY testbed /testbed
RUN mkdir -p /opt/miniconda3/bin /opt/miniconda3/envs/testbed/bin \
 && echo 'conda() { if [ "$1" = activate ]; then PATH="/opt/miniconda3/envs/$2/bin:$PATH"; export PATH; fi; }' > /opt/miniconda3/bin/activate \
 && ln -s /usr/bin/python3 /opt/miniconda3/envs/testbed/bin/python
"#;

/// The same instances in SWE-bench-shaped images, under each backend
/// (`--env podman`, and `--env oci` from the same image saved by podman):
/// the same verdicts.
fn in_swebench_shaped_images_the_verdicts_are_the_package_s(backend: Backend) {
    let log = django_instances_match_the_package(Some(backend));
    // The testbed environment was there: activated, its python found.
    assert!(log.contains("+ conda activate testbed"), "{log}");
    for missing in ["No such file or directory", "command not found"] {
        assert!(!log.contains(missing), "{log}");
    }
    assert!(log.contains("No module named pip"), "{log}");
}

under_each_backend!(
    instances_in_swebench_shaped_images,
    super::in_swebench_shaped_images_the_verdicts_are_the_package_s
);

/// SWE-bench's image builder commits what its setup changed in tracked
/// files on top of the base (`git commit --allow-empty -am SWE-bench`:
/// sphinx's tox.ini gains pytest's `-rA` there) and its eval script runs
/// on that commit, resetting only the test files to the base. Here the
/// stand-in runner reads its verbosity from the repo's setup.cfg: 1 at the
/// base (no line per test, so every test would be missing), 2 after the
/// image's two setup commits, the second of which also changes the line
/// of the test file that the test patch changes (which then applies only
/// to the base's version of that file). The agent starts from the setup
/// commits (it sees them in `git log`, its patch holds only its own
/// change), the leak probes find nothing of the fix committed upstream
/// past the base, the tests run on the setup commits with the test file
/// reset to the base: the oracle resolves (with `--history none` too),
/// noop does not, and no warning says the repo was not at the base.
fn the_image_s_setup_commits_are_where_the_agent_starts_and_the_tests_run(backend: Backend) {
    use crate::support::harness::{Fixture, diff_of, git, scripted_agent, unittest_name};
    use crate::support::probes::{self, Future};
    let fixture = Fixture::new();
    let (work, _) = fixture.repo(
        "work",
        &[
            ("calc.py", CALC),
            ("setup.cfg", "[runtests]\nverbosity = 1\n"),
            ("tests/runtests.py", RUNTESTS),
            ("tests/calc_tests/__init__.py", ""),
            ("tests/calc_tests/tests.py", VISIBLE),
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        work.join("tests/runtests.py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    git(&work, &["add", "tests/runtests.py"]);
    git(&work, &["commit", "-q", "-m", "runtests is a program"]);
    let base = git(&work, &["rev-parse", "HEAD"]);
    let fixed =
        CALC.replacen("a - b", "a + b", 1)
            .replacen("a + b\n\n\ndef sub", "a * b\n\n\ndef sub", 1);
    let gold = diff_of(&work, &[("calc.py", &fixed)]);
    let test_patch = diff_of(&work, &[("tests/calc_tests/tests.py", HIDDEN)]);
    // Upstream's fix, past the base: the image's clone has it (its
    // remote's main), the agent must not.
    std::fs::write(
        work.join("calc.py"),
        format!("{fixed}# FUTURE-FIX-CONTENT\n"),
    )
    .expect("write");
    git(&work, &["commit", "-q", "-am", "FUTURE-FIX-MESSAGE"]);
    let future = git(&work, &["rev-parse", "HEAD"]);
    let id = "django__django-7";
    let tasks = fixture.tasks(&[json!({
        "instance_id": id,
        "repo": "django/django",
        "base_commit": base,
        "problem_statement": format!("Problem of task {id}. add() subtracts and mul() adds."),
        "patch": gold,
        "test_patch": test_patch,
        "FAIL_TO_PASS": json!([
            unittest_name("calc_tests.tests.CalcTests", "test_add"),
            unittest_name("calc_tests.tests.CalcTests", "test_mul"),
        ]).to_string(),
        "PASS_TO_PASS": json!([unittest_name("calc_tests.tests.CalcTests", "test_sub")]).to_string(),
        "version": "4.2",
    })]);
    let mut setup = Vec::new();
    let image = swebench_shaped_image_then(&fixture, &work, &base, &[id], backend, |testbed| {
        // As SWE-bench's builder: on the branch, reset to the base.
        git(testbed, &["checkout", "-q", "-B", "main"]);
        std::fs::write(testbed.join("setup.cfg"), "[runtests]\nverbosity = 2\n").expect("write");
        git(
            testbed,
            &["commit", "-q", "-am", "pre_install: verbose runner"],
        );
        setup.push(git(testbed, &["rev-parse", "HEAD"]));
        let tests = testbed.join("tests/calc_tests/tests.py");
        let changed = VISIBLE.replace("from calc import sub", "from calc import sub  # set up");
        std::fs::write(tests, changed).expect("write");
        git(
            testbed,
            &["commit", "-q", "--allow-empty", "-am", "SWE-bench"],
        );
        setup.push(git(testbed, &["rev-parse", "HEAD"]));
    });
    let probe = probes::script(&Future {
        commits: &[future.as_str()],
        texts: &["FUTURE-FIX-MESSAGE", "FUTURE-FIX-CONTENT"],
        unreadable: &[],
    });
    let commands = [
        probe.as_str(),
        "git log --format=%s",
        "cat setup.cfg",
        FULL_FIX,
    ];
    let server = scripted_agent(&[(id, &commands)]);
    let flags: Vec<&str> = image.flags.iter().map(String::as_str).collect();
    let run = fixture.run_scripted(&tasks, &server, &flags);
    let oracle_args = [&["--model", "oracle", "--history", "none"][..], &flags].concat();
    let oracle = fixture.run_into(&fixture.path("oracle"), &tasks, &oracle_args, &[]);
    let noop_args = [&["--model", "noop"][..], &flags].concat();
    let noop = fixture.run_into(&fixture.path("noop"), &tasks, &noop_args, &[]);
    for (name, run) in [("scripted", &run), ("oracle", &oracle), ("noop", &noop)] {
        assert!(
            !run.stderr.contains("not at the base"),
            "{name}: {}",
            run.stderr
        );
        let checkout = &run.events(id, "checkout")[0];
        assert_eq!(checkout["commit"], base.as_str(), "{name}: {checkout}");
        assert_eq!(
            checkout["setup_commits"],
            json!(setup),
            "{name}: {checkout}"
        );
        assert!(checkout.get("warning").is_none(), "{name}: {checkout}");
    }
    let answers = crate::support::harness::tool_answers(&server, id);
    assert!(probes::finished(&answers[0]), "{}", answers[0]);
    assert_eq!(
        probes::leaks(&answers[0]),
        Vec::<String>::new(),
        "{}",
        answers[0]
    );
    let subjects: Vec<&str> = answers[1].lines().take(3).collect();
    assert_eq!(
        subjects,
        [
            "SWE-bench",
            "pre_install: verbose runner",
            "runtests is a program"
        ],
        "{}",
        answers[1]
    );
    assert!(answers[2].contains("verbosity = 2"), "{}", answers[2]);
    // The agent's patch is against the setup commits: its change alone.
    let patch = std::fs::read_to_string(run.task_dir(id).join("patch.diff")).expect("patch");
    assert!(patch.contains("+    return a + b"), "{patch}");
    assert!(
        !patch.contains("setup.cfg") && !patch.contains("tests.py"),
        "{patch}"
    );
    assert_eq!(run.events(id, "checkout")[0]["head"], setup[1].as_str());
    // With --history none, HEAD was a parentless commit of the same tree.
    let head = &oracle.events(id, "checkout")[0]["head"];
    assert!(head.is_string() && *head != setup[1].as_str(), "{head}");
    for (name, run, resolution) in [
        ("scripted", &run, "RESOLVED_FULL"),
        ("oracle", &oracle, "RESOLVED_FULL"),
        ("noop", &noop, "RESOLVED_NO"),
    ] {
        let tests = run.tests_json(id);
        let log = std::fs::read_to_string(run.task_dir(id).join("test.log")).unwrap_or_default();
        assert_eq!(
            tests["verdict"]["resolution"], resolution,
            "{name}: {tests}\n{log}\nstderr: {}",
            run.stderr
        );
        // The test patch went in strictly: its file was the base's again.
        assert_eq!(
            run.events(id, "test")[0]["test_patch_method"],
            "git apply",
            "{name}"
        );
    }
}

under_each_backend!(
    setup_commits_in_swebench_shaped_images,
    super::the_image_s_setup_commits_are_where_the_agent_starts_and_the_tests_run
);

/// Builds the SWE-bench-shaped image of `work` at `base`, under each
/// instance's SWE-bench name, and returns the flags that run in it under
/// `backend` (for oci: the image saved once, under each instance's name
/// in a folder that the `--image` template names).
fn swebench_shaped_image(
    fixture: &crate::support::harness::Fixture,
    work: &Path,
    base: &str,
    ids: &[&str],
    backend: Backend,
) -> ShapedImage {
    swebench_shaped_image_then(fixture, work, base, ids, backend, |_| {})
}

/// [`swebench_shaped_image`], with `then` run on its repo (at the base)
/// before the build: SWE-bench's image builder commits its setup there.
fn swebench_shaped_image_then(
    fixture: &crate::support::harness::Fixture,
    work: &Path,
    base: &str,
    ids: &[&str],
    backend: Backend,
    then: impl FnOnce(&Path),
) -> ShapedImage {
    use crate::support::harness::{git, path_arg};
    // Each test its own namespace: tests that build the same instance ids
    // at once (under each backend) must not tag over each other.
    static BUILT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let namespace = format!(
        "localhost/onebash-test/swebench-{}-{}",
        std::process::id(),
        BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let tags: Vec<String> = ids
        .iter()
        .map(|id| format!("{namespace}/{}:latest", image_name(id)))
        .collect();
    let context = fixture.path("image");
    std::fs::create_dir_all(&context).expect("mkdir");
    let testbed = context.join("testbed");
    git(
        &context,
        &["clone", "-q", path_arg(work), path_arg(&testbed)],
    );
    git(&testbed, &["checkout", "-q", "--detach", base]);
    then(&testbed);
    std::fs::write(context.join("Containerfile"), SWEBENCH_SHAPED).expect("write");
    // Made before the build, so that whatever it tagged goes when the test
    // ends, passed or not.
    let mut image = ShapedImage {
        flags: Vec::new(),
        tags: ImageTags(tags),
    };
    let mut build = Command::new("podman");
    build.args(["build", "-q"]);
    for tag in &image.tags.0 {
        build.args(["-t", tag]);
    }
    let built = build.arg(&context).output().expect("podman build");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let template = r#"sweb.eval.x86_64.{{ instance_id | lower | replace("__", "_1776_") }}"#;
    if backend.engine().is_some() {
        if backend == Backend::Docker {
            for tag in &image.tags.0 {
                crate::support::backend::in_docker(tag);
            }
        }
        image.flags = backend.flags_in_store(&format!("{namespace}/{template}:latest"));
        return image;
    }
    let flags = backend.image_flags(fixture, &image.tags.0[0]);
    let archive = flags[3]
        .strip_prefix("docker-archive:")
        .expect("an archive");
    let named = fixture.path("named");
    std::fs::create_dir_all(&named).expect("mkdir");
    for id in ids {
        let link = named.join(format!("{}.tar", image_name(id)));
        std::os::unix::fs::symlink(archive, link).expect("symlink");
    }
    let archive = format!("docker-archive:{}/{template}.tar", named.display());
    image.flags = ["--env", "oci", "--image", &archive]
        .map(str::to_owned)
        .to_vec();
    image
}

/// The flags that run in a SWE-bench-shaped image, and its tags, removed
/// from podman's store when the test ends (passed or not).
struct ShapedImage {
    flags: Vec<String>,
    tags: ImageTags,
}

/// Four django instances graded by SWE-bench's django 4.2 recipe, on the
/// host or in SWE-bench-shaped images: a scripted whole fix, a partial
/// one, none, one of a version with no recipe, and the oracle; each
/// verdict and status must be the package's on onebash's test log.
/// Returns the test log of the whole fix.
fn django_instances_match_the_package(in_image: Option<Backend>) -> String {
    use crate::support::harness::{Fixture, scripted_agent};
    let fixture = Fixture::new();
    let django = DjangoShaped::new(&fixture);
    let (work, sha_x, mirrors) = (&django.work, &django.base, &django.mirrors);
    let (f2p, p2p) = (&django.f2p, &django.p2p);
    let instance = |id: &str, version: &str| django.instance(id, version, HIDDEN);
    let tasks = fixture.tasks(&[
        instance("django__django-1", "4.2"),
        instance("django__django-2", "4.2"),
        instance("django__django-3", "4.2"),
        instance("django__django-4", "0.1"),
    ]);
    let server = scripted_agent(&[
        ("django__django-1", &[FULL_FIX]),
        ("django__django-2", &["sed -i '0,/a - b/s//a + b/' calc.py"]),
        ("django__django-3", &["cat calc.py"]),
        ("django__django-4", &["cat calc.py"]),
    ]);
    let mirrors_arg = mirrors.to_str().expect("utf-8");
    let ids = [
        "django__django-1",
        "django__django-2",
        "django__django-3",
        "django__django-4",
    ];
    let image = in_image.map(|backend| swebench_shaped_image(&fixture, work, sha_x, &ids, backend));
    let extra: Vec<&str> = image
        .iter()
        .flat_map(|image| image.flags.iter().map(String::as_str))
        .collect();
    let args = [&["--repo-base", mirrors_arg][..], &extra].concat();
    let run = fixture.run_scripted(&tasks, &server, &args);
    let oracle_args = [&["--model", "oracle"][..], &args].concat();
    let oracle = fixture.run_into(&fixture.path("oracle"), &tasks, &oracle_args, &[]);
    assert_eq!(run.code, 1, "stderr:\n{}", run.stderr);
    assert_eq!(oracle.code, 1, "stderr:\n{}", oracle.stderr);
    // The run goes on past the instance whose version has no recipe.
    let unknown = run.row("django__django-4");
    assert_eq!(unknown["status"], "error", "{unknown:?}");
    assert!(
        unknown["error"].contains("version \"0.1\"") && unknown["error"].contains("--test-command"),
        "{unknown:?}"
    );
    let graded = [
        (&run, "django__django-1", "RESOLVED_FULL"),
        (&run, "django__django-2", "RESOLVED_PARTIAL"),
        (&run, "django__django-3", "RESOLVED_NO"),
        (&oracle, "django__django-1", "RESOLVED_FULL"),
    ];
    for (run, id, resolution) in graded {
        let tests = run.tests_json(id);
        let log = std::fs::read_to_string(run.task_dir(id).join("test.log")).expect("test.log");
        let dir = run.task_dir(id);
        let mut files = String::new();
        for entry in std::fs::read_dir(&dir).expect("task dir").flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            files.push_str(&format!(
                "=== {}\n{}\n",
                entry.path().display(),
                text.chars().take(6000).collect::<String>()
            ));
        }
        assert_eq!(
            tests["verdict"]["resolution"], resolution,
            "{id}: {tests}\n{log}\nstderr: {}\n{files}",
            run.stderr
        );
        assert_eq!(
            run.row(id)["status"],
            if resolution == "RESOLVED_FULL" {
                "passed"
            } else {
                "failed"
            },
            "{id}"
        );
        // SWE-bench's recipe ran: the directive is the module name.
        assert!(log.contains("--parallel 1 calc_tests.tests"), "{id}: {log}");
    }
    let log = std::fs::read_to_string(run.task_dir("django__django-1").join("test.log"))
        .expect("test.log");
    package_agrees("django/django", "4.2", &graded, json!(f2p), json!(p2p));
    log
}

/// A micropython-shaped repo for SWE-bench's micropython 10095 recipe:
/// its build step sources `tools/ci.sh` and calls
/// `ci_unix_build_helper`, which here makes the `micropython` binary a
/// python3; `tests/run-tests.py -i basics/fun` runs the matching tests
/// and compares each one's output with its `.exp`, printing `pass` or
/// `FAIL` per test as the real runner does.
const CI_SH: &str = "ci_unix_build_helper() {\n    mkdir -p ports/unix/build-standard\n    printf '#!/bin/sh\\nexec python3 \"$@\"\\n' > ports/unix/build-standard/micropython\n    chmod +x ports/unix/build-standard/micropython tests/run-tests.py\n}\n";
const RUN_TESTS: &str = r#"#!/usr/bin/env python3
import glob, os, re, subprocess, sys
include = sys.argv[sys.argv.index("-i") + 1]
micropython = os.environ["MICROPY_MICROPYTHON"]
print("in " + os.getcwd())
failed = []
for test in sorted(glob.glob("basics/*.py")):
    if not re.search(include, test):
        continue
    out = subprocess.run([micropython, test], capture_output=True, text=True).stdout
    with open(test + ".exp") as f:
        ok = out == f.read()
    print(("pass  " if ok else "FAIL  ") + test)
    if not ok:
        failed.append(test)
print("%d tests failed" % len(failed))
sys.exit(1 if failed else 0)
"#;
const MP_CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";

fn mp_test(call: &str) -> String {
    format!("import sys\nsys.path.insert(0, '..')\nfrom calc import add, mul, sub\nprint({call})\n")
}

#[test]
fn a_multilingual_instance_runs_its_recipe_and_gets_the_package_s_verdicts() {
    micropython_instances_match_the_package(None);
}

/// The same in SWE-bench-shaped images, under each backend: the repo at
/// /testbed, and no environment to activate (the package's script for
/// other languages activates none; the image's PATH is the one exec uses).
fn a_multilingual_instance_in_its_image_gets_the_package_s_verdicts(backend: Backend) {
    micropython_instances_match_the_package(Some(backend));
}

under_each_backend!(
    multilingual_instance_in_its_image,
    super::a_multilingual_instance_in_its_image_gets_the_package_s_verdicts
);

/// Three micropython instances graded by SWE-bench's recipe for its
/// version 10095 (build steps, then `cd tests` and the runner), on the
/// host or in SWE-bench-shaped images: a whole fix, half of one and none,
/// and the oracle. The verdicts are the package's on onebash's own test
/// logs.
fn micropython_instances_match_the_package(in_image: Option<Backend>) {
    use crate::support::harness::{Fixture, diff_of, scripted_agent};
    let fixture = Fixture::new();
    let (work, sha) = fixture.repo(
        "work",
        &[
            ("calc.py", MP_CALC),
            ("tools/ci.sh", CI_SH),
            ("tests/run-tests.py", RUN_TESTS),
            ("tests/basics/fun_sub.py", &mp_test("sub(3, 1)")),
            ("tests/basics/fun_sub.py.exp", "2\n"),
            ("tests/basics/other.py", &mp_test("1 / 0")),
            ("tests/basics/other.py.exp", "never\n"),
        ],
    );
    let mirrors = fixture.mirrors(&work, "micropython/micropython");
    let gold = diff_of(
        &work,
        &[(
            "calc.py",
            &MP_CALC.replacen("a - b", "a + b", 1).replacen(
                "a + b\n\n\ndef sub",
                "a * b\n\n\ndef sub",
                1,
            ),
        )],
    );
    let test_patch = diff_of(
        &work,
        &[
            ("tests/basics/fun_add.py", &mp_test("add(1, 2)")),
            ("tests/basics/fun_add.py.exp", "3\n"),
            ("tests/basics/fun_mul.py", &mp_test("mul(2, 3)")),
            ("tests/basics/fun_mul.py.exp", "6\n"),
        ],
    );
    let f2p = ["basics/fun_add.py", "basics/fun_mul.py"];
    let p2p = ["basics/fun_sub.py"];
    let instance = |id: &str| {
        json!({
            "instance_id": id,
            "repo": "micropython/micropython",
            "base_commit": sha,
            "problem_statement": format!("Problem of task {id}. add() subtracts and mul() adds."),
            "patch": gold,
            "test_patch": test_patch,
            "FAIL_TO_PASS": json!(f2p).to_string(),
            "PASS_TO_PASS": json!(p2p).to_string(),
            "version": "10095",
        })
    };
    let ids = [
        "micropython__micropython-1",
        "micropython__micropython-2",
        "micropython__micropython-3",
    ];
    let tasks = fixture.tasks(&ids.map(instance));
    let server = scripted_agent(&[
        (ids[0], &[FULL_FIX]),
        (ids[1], &["sed -i '0,/a - b/s//a + b/' calc.py"]),
        (ids[2], &["cat calc.py"]),
    ]);
    let image = in_image.map(|backend| swebench_shaped_image(&fixture, &work, &sha, &ids, backend));
    let extra: Vec<&str> = image
        .iter()
        .flat_map(|image| image.flags.iter().map(String::as_str))
        .collect();
    let args = [
        &["--repo-base", mirrors.to_str().expect("utf-8")][..],
        &extra,
    ]
    .concat();
    let run = fixture.run_scripted(&tasks, &server, &args);
    let oracle_args = [&["--model", "oracle"][..], &args].concat();
    let oracle = fixture.run_into(&fixture.path("oracle"), &tasks, &oracle_args, &[]);
    // Every row has a verdict.
    assert_eq!(run.code, 0, "stderr:\n{}", run.stderr);
    assert_eq!(oracle.code, 0, "stderr:\n{}", oracle.stderr);
    let graded = [
        (&run, ids[0], "RESOLVED_FULL"),
        (&run, ids[1], "RESOLVED_PARTIAL"),
        (&run, ids[2], "RESOLVED_NO"),
        (&oracle, ids[0], "RESOLVED_FULL"),
    ];
    for (run, id, resolution) in graded {
        let tests = run.tests_json(id);
        let log = std::fs::read_to_string(run.task_dir(id).join("test.log")).expect("test.log");
        assert_eq!(
            tests["verdict"]["resolution"], resolution,
            "{id}: {tests}\n{log}"
        );
        // The recipe ran: the build step, then the runner from tests/.
        assert!(
            log.contains("+ ci_unix_build_helper VARIANT=standard"),
            "{id}: {log}"
        );
        assert!(log.contains("pass  basics/fun_sub.py"), "{id}: {log}");
        // `-i basics/fun` picks the tests: another one never runs.
        assert!(!log.contains("basics/other.py"), "{id}: {log}");
        // In the image, the repo it holds; no command was missing.
        assert_eq!(
            log.contains("in /testbed/tests\n"),
            in_image.is_some(),
            "{id}: {log}"
        );
        assert!(!log.contains("command not found"), "{id}: {log}");
    }
    package_agrees(
        "micropython/micropython",
        "10095",
        &graded,
        json!(f2p),
        json!(p2p),
    );
}

/// The package, grading onebash's own test log of each `(run, id,
/// resolution)` of `repo` at `version` with the same lists, gives that
/// resolution and the statuses onebash read (when the package is here).
fn package_agrees(
    repo: &str,
    version: &str,
    graded: &[(&crate::support::harness::RunOutput, &str, &str)],
    fail_to_pass: Value,
    pass_to_pass: Value,
) {
    let Some(python) = swebench_python() else {
        return;
    };
    let cases: Vec<Value> = graded
        .iter()
        .map(|(run, id, _)| {
            json!({
                "instance_id": id,
                "repo": repo,
                "version": version,
                "log_path": run.task_dir(id).join("test.log").display().to_string(),
                "FAIL_TO_PASS": fail_to_pass,
                "PASS_TO_PASS": pass_to_pass,
            })
        })
        .collect();
    let theirs = package_grades(&python, &cases);
    for ((run, id, resolution), theirs) in graded
        .iter()
        .zip(theirs["results"].as_array().expect("results"))
    {
        assert_eq!(theirs["resolution"], *resolution, "{id}: {theirs}");
        assert_eq!(theirs["resolved"], *resolution == "RESOLVED_FULL", "{id}");
        // Every status onebash read is the package's, and no other.
        assert_eq!(run.tests_json(id)["statuses"], theirs["statuses"], "{id}");
    }
}

/// The cases of the logs where the two rule sets part (rules/cases.json).
fn rule_cases() -> Vec<Value> {
    let dir = fixtures().join("rules");
    let text = std::fs::read_to_string(dir.join("cases.json")).expect("rules/cases.json");
    let mut cases: Vec<Value> = serde_json::from_str(&text).expect("a JSON list");
    for case in &mut cases {
        let log = dir.join(case["log"].as_str().expect("log"));
        case["log_path"] = json!(log.display().to_string());
    }
    cases
}

/// A case as 5.0's rows name it: its parser by 5.0's registry name (the
/// 4.1 recipe's, when the case has none) and its eval_type.
fn as_swebench5(case: &Value) -> Value {
    let mut case = case.clone();
    let repo = case["repo"].as_str().expect("repo").to_owned();
    let entry = &specs().repos[&repo];
    if case.get("log_parser").is_none() {
        case["log_parser"] = json!(entry.parser.clone().expect("a parser"));
    }
    if case.get("eval_type").is_none() {
        let fail_only = specs().fail_only_repos.contains(&repo);
        case["eval_type"] = json!(if fail_only {
            "fail_only"
        } else {
            "pass_and_fail"
        });
    }
    case
}

/// onebash's grade of a case under `rules`, shaped as the fixture
/// scripts answer: statuses, applied, resolution, resolved and the
/// report.json of a model patch. None when onebash does not mirror the
/// case's parser under `rules`.
fn onebash_under(rules: Rules, case: &Value) -> Option<Value> {
    let instance = Instance {
        instance_id: case["instance_id"].as_str().expect("instance_id"),
        repo: case["repo"].as_str().expect("repo"),
        version: case["version"].as_str().expect("version"),
        base_commit: "",
        test_patch: "",
    };
    let eval = eval_for(&instance).unwrap_or_else(|err| panic!("{}: {err}", instance.repo));
    let (parser, fail_only) = match rules {
        Rules::Swebench41 => (eval.parser, eval.fail_only),
        Rules::Swebench50 => {
            let case = as_swebench5(case);
            let name = case["log_parser"].as_str().expect("log_parser");
            (
                parser_for_5(name, instance.instance_id).ok()?,
                case["eval_type"] == "fail_only",
            )
        }
    };
    let log = std::fs::read_to_string(case["log_path"].as_str().expect("path")).expect("log");
    let graded = grade_output(
        rules,
        parser,
        fail_only,
        &log,
        &strings(&case["FAIL_TO_PASS"]),
        &strings(&case["PASS_TO_PASS"]),
    );
    let report = instance_report(
        rules,
        instance.instance_id,
        false,
        Some(&graded.instance_grade()),
        &log,
    );
    let report: Value = serde_json::from_str(&report.to_json()).expect("report.json");
    Some(json!({
        "statuses": graded.statuses,
        "applied": graded.applied,
        "resolution": graded.verdict.resolution,
        "resolved": graded.verdict.resolved,
        "report": report,
    }))
}

/// What differs between onebash's answers and the package's, case by case.
fn differences(rules: Rules, cases: &[Value], theirs: &Value) -> Vec<String> {
    let mut wrong = Vec::new();
    for (case, theirs) in cases
        .iter()
        .zip(theirs["results"].as_array().expect("results"))
    {
        let Some(ours) = onebash_under(rules, case) else {
            continue;
        };
        for key in ["statuses", "applied", "resolution", "resolved", "report"] {
            if ours[key] != theirs[key] {
                wrong.push(format!(
                    "{} under {rules}: {key}\n  onebash: {}\n  swebench: {}",
                    case["name"], ours[key], theirs[key]
                ));
            }
        }
    }
    wrong
}

#[test]
fn recorded_logs_grade_under_5_0_rules_as_the_5_0_package_grades_them() {
    let Some(python) = swebench5_python() else {
        return;
    };
    let cases: Vec<Value> = cases()
        .iter()
        .chain(&rule_cases())
        .map(as_swebench5)
        .collect();
    let theirs = package_answer(&python, "swebench5_grade.py", &cases);
    assert_eq!(theirs["swebench"], "5.0.2");
    let unmirrored: std::collections::BTreeSet<String> = cases
        .iter()
        .filter(|case| onebash_under(Rules::Swebench50, case).is_none())
        .map(|case| case["log_parser"].as_str().unwrap_or_default().to_owned())
        .collect();
    // Only the two parsers 5.0.2 rewrote otherwise are left out.
    assert_eq!(
        unmirrored,
        ["parse_log_gradle_custom", "parse_log_maven"]
            .map(str::to_owned)
            .into(),
    );
    let wrong = differences(Rules::Swebench50, &cases, &theirs);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_rule_logs_grade_as_each_package_grades_them_and_the_rule_sets_part_where_they_say() {
    let (Some(python4), Some(python5)) = (swebench_python(), swebench5_python()) else {
        return;
    };
    let cases = rule_cases();
    let old = package_answer(&python4, "swebench_grade.py", &cases);
    let five: Vec<Value> = cases.iter().map(as_swebench5).collect();
    let new = package_answer(&python5, "swebench5_grade.py", &five);
    let mut wrong = differences(Rules::Swebench41, &cases, &old);
    wrong.extend(differences(Rules::Swebench50, &five, &new));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The cases this file was written for: where the two versions differ.
    let parted: Vec<&str> = cases
        .iter()
        .zip(old["results"].as_array().expect("results"))
        .zip(new["results"].as_array().expect("results"))
        .filter(|((_, a), b)| a["resolved"] != b["resolved"])
        .map(|((case, _), _)| case["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        parted,
        [
            "skipped-f2p",
            "spoofed-pass",
            "empty-no-suite",
            "truncated-agree"
        ]
    );
}

#[test]
fn the_5_0_eval_script_records_the_exit_code_as_the_5_0_package_does() {
    let Some(python) = swebench5_python() else {
        return;
    };
    let mut scripts: Vec<String> = ["pallets/flask", "django/django", "markedjs/marked"]
        .iter()
        .map(|repo| {
            let (version, _) = specs().repos[*repo]
                .versions
                .iter()
                .next()
                .expect("a version");
            package_script(&Instance {
                instance_id: "o__r-1",
                repo,
                version,
                base_commit: "abc123",
                test_patch: &realistic_test_patch(repo, "py"),
            })
            .expect("a script")
        })
        .collect();
    scripts.push("#!/bin/bash\nset -uxo pipefail\nmake test\n".to_owned());
    let input: Vec<Value> = scripts.iter().map(|s| json!({"script": s})).collect();
    let theirs = package_answer(&python, "swebench5_grade.py", &input);
    for (script, theirs) in scripts
        .iter()
        .zip(theirs["results"].as_array().expect("results"))
    {
        // parse_eval_script's cut: the text stripped, the shebang and
        // `set` lines out.
        let recorded = record_test_exit_code(script.trim());
        let ours: Vec<&str> = recorded
            .split('\n')
            .filter(|line| !["#!/bin/bash", "set -uxo pipefail"].contains(line))
            .collect();
        let theirs: Vec<String> = strings(theirs);
        assert_eq!(ours, theirs, "{script}");
    }
}

/// The hidden tests with the new one skipped, as a patch that skips its
/// FAIL_TO_PASS test on the grader's machine would leave it.
const HIDDEN_SKIPPED: &str = "import unittest\nfrom calc import add, sub\n\n\nclass CalcTests(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n\n    @unittest.skip(\"no database\")\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n";

#[test]
fn a_skipped_fail_to_pass_test_passes_under_4_1_and_fails_under_5_0_and_the_default_is_the_row_s() {
    use crate::support::harness::{Fixture, diff_of, unittest_name};
    let fixture = Fixture::new();
    let DjangoShaped {
        work,
        base,
        mirrors,
        ..
    } = DjangoShaped::new(&fixture);
    let test_patch = diff_of(&work, &[("tests/calc_tests/tests.py", HIDDEN_SKIPPED)]);
    let row = |id: &str| {
        json!({
            "instance_id": id,
            "repo": "django/django",
            "base_commit": base,
            "problem_statement": "add() subtracts.",
            "test_patch": test_patch,
            "FAIL_TO_PASS": json!([unittest_name("calc_tests.tests.CalcTests", "test_add")]).to_string(),
            "PASS_TO_PASS": json!([unittest_name("calc_tests.tests.CalcTests", "test_sub")]).to_string(),
            "version": "4.2",
        })
    };
    // A swebench 5 row: its own eval script (which resets the test file
    // and applies the test patch itself) and parser.
    let mut five = row("django__django-5");
    five["eval_script"] = json!(format!(
        "#!/bin/bash\nset -uxo pipefail\ngit checkout {base} -- tests/calc_tests/tests.py\n\
         git apply -v - <<'EOF_114329324912'\n{test_patch}\nEOF_114329324912\n\
         : '>>>>> Start Test Output'\n./tests/runtests.py --verbosity 2 calc_tests.tests\n\
         : '>>>>> End Test Output'\ngit checkout {base} -- tests/calc_tests/tests.py\n"
    ));
    five["log_parser"] = json!("parse_log_django");
    five["eval_type"] = json!("pass_and_fail");
    let tasks = fixture.tasks(&[row("django__django-4"), five]);
    let mirrors_arg = mirrors.to_str().expect("utf-8");
    let run = |name: &str, grading: Option<&str>| {
        let mut args = vec!["--model", "noop", "--repo-base", mirrors_arg];
        if let Some(rules) = grading {
            args.extend(["--grading", rules]);
        }
        fixture.run_into(&fixture.path(name), &tasks, &args, &[])
    };
    let (default, old, new) = (
        run("default", None),
        run("old", Some("swebench-4.1")),
        run("new", Some("swebench-5.0")),
    );
    let cases = [
        (&default, "django__django-4", "swebench-4.1", "passed"),
        (&default, "django__django-5", "swebench-5.0", "failed"),
        (&old, "django__django-4", "swebench-4.1", "passed"),
        (&old, "django__django-5", "swebench-4.1", "passed"),
        (&new, "django__django-4", "swebench-5.0", "failed"),
        (&new, "django__django-5", "swebench-5.0", "failed"),
    ];
    for (run, id, rules, status) in cases {
        let row = run.row(id);
        assert_eq!(
            row["status"], status,
            "{id} by {rules}: {row:?}\n{}",
            run.stderr
        );
        let tests = run.tests_json(id);
        assert_eq!(tests["verdict"]["rules"], rules, "{id}: {tests}");
        assert_eq!(run.events(id, "test")[0]["rules"], rules, "{id}");
        let log = std::fs::read_to_string(run.task_dir(id).join("test.log")).expect("test.log");
        assert!(log.contains("skipped 'no database'"), "{id}: {log}");
        // The eval script records the test command's exit status as 5.0's
        // does, under either rule set (4.1's grading does not read it).
        assert!(
            log.contains(">>>>> Test Exit Code: 0"),
            "{id} by {rules}: {log}"
        );
    }
    // The row's own script put the test patch in itself, once.
    let log =
        std::fs::read_to_string(new.task_dir("django__django-5").join("test.log")).expect("log");
    assert!(
        log.contains("Applied patch tests/calc_tests/tests.py cleanly"),
        "{log}"
    );
    assert!(
        new.events("django__django-5", "test")[0]
            .get("test_patch_method")
            .is_none()
    );
}

/// A hidden test file that the test patch adds, beside the visible ones.
const ADDED: &str = "import unittest\nfrom calc import add, mul\n\n\nclass AddedTests(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n";

/// sphinx-doc__sphinx-8595's shape (issue 37): a test patch that only adds
/// files, in an image whose setup commit changes a tracked file the test
/// run reads (setup.cfg's verbosity 2 here, sphinx's tox.ini `-rA`
/// there). swebench 4.1.0's eval script resets with a bare `git checkout
/// BASE` (no file to name), which undoes the setup commit: the runner
/// prints no line per test and even the gold patch is unresolved. 5.x
/// resets files only and resolves it. Under `--grading swebench-4.1`
/// onebash gives 4.1.0's verdict and under `swebench-5.0` 5.0.2's, each
/// checked by that package's grading of onebash's own test log; and
/// 4.1.0's script for the instance has the bare reset onebash runs.
fn a_test_patch_that_only_adds_files_grades_as_each_package_grades_it(backend: Backend) {
    use crate::support::harness::{Fixture, diff_of, git, unittest_name};
    let fixture = Fixture::new();
    let (work, _) = fixture.repo(
        "work",
        &[
            ("calc.py", CALC),
            ("setup.cfg", "[runtests]\nverbosity = 1\n"),
            ("tests/runtests.py", RUNTESTS),
            ("tests/calc_tests/__init__.py", ""),
            ("tests/calc_tests/tests.py", VISIBLE),
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        work.join("tests/runtests.py"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    git(&work, &["add", "tests/runtests.py"]);
    git(&work, &["commit", "-q", "-m", "runtests is a program"]);
    let base = git(&work, &["rev-parse", "HEAD"]);
    let fixed =
        CALC.replacen("a - b", "a + b", 1)
            .replacen("a + b\n\n\ndef sub", "a * b\n\n\ndef sub", 1);
    let gold = diff_of(&work, &[("calc.py", &fixed)]);
    let test_patch = diff_of(&work, &[("tests/calc_tests/test_added.py", ADDED)]);
    assert!(test_patch.contains("new file mode"), "{test_patch}");
    let id = "django__django-8";
    let name = |method: &str| unittest_name("calc_tests.test_added.AddedTests", method);
    let (f2p, p2p) = (json!([name("test_add"), name("test_mul")]), json!([]));
    let instance = json!({
        "instance_id": id,
        "repo": "django/django",
        "base_commit": base,
        "problem_statement": format!("Problem of task {id}. add() subtracts and mul() adds."),
        "patch": gold,
        "test_patch": test_patch,
        "FAIL_TO_PASS": f2p.to_string(),
        "PASS_TO_PASS": p2p.to_string(),
        "version": "4.2",
    });
    let tasks = fixture.tasks(std::slice::from_ref(&instance));
    let image = swebench_shaped_image_then(&fixture, &work, &base, &[id], backend, |testbed| {
        git(testbed, &["checkout", "-q", "-B", "main"]);
        std::fs::write(testbed.join("setup.cfg"), "[runtests]\nverbosity = 2\n").expect("write");
        git(
            testbed,
            &["commit", "-q", "-am", "pre_install: verbose runner"],
        );
        git(
            testbed,
            &["commit", "-q", "--allow-empty", "-am", "SWE-bench"],
        );
    });
    let flags: Vec<&str> = image.flags.iter().map(String::as_str).collect();
    let run_under = |rules: &str| {
        let args = [&["--model", "oracle", "--grading", rules][..], &flags].concat();
        fixture.run_into(&fixture.path(rules), &tasks, &args, &[])
    };
    let old = run_under("swebench-4.1");
    let new = run_under("swebench-5.0");
    for (run, resolution) in [(&old, "RESOLVED_NO"), (&new, "RESOLVED_FULL")] {
        let tests = run.tests_json(id);
        let log = std::fs::read_to_string(run.task_dir(id).join("test.log")).unwrap_or_default();
        assert_eq!(
            tests["verdict"]["resolution"], resolution,
            "{tests}\n{log}\nstderr: {}",
            run.stderr
        );
    }
    // 4.1.0's script for the instance: a bare reset before the test patch,
    // the one onebash's recipe names.
    let ours = eval_for(&Instance {
        instance_id: id,
        repo: "django/django",
        version: "4.2",
        base_commit: &base,
        test_patch: &test_patch,
    })
    .expect("a recipe");
    assert_eq!(
        ours.bare_reset.as_deref(),
        Some(format!("git checkout '{base}'").as_str())
    );
    if let Some(python) = swebench_python() {
        let theirs = package_answer(
            &python,
            "swebench_scripts.py",
            std::slice::from_ref(&instance),
        );
        let script = theirs["scripts"][0].as_str().expect("a script");
        let reset = script.find(&format!("\ngit checkout {base} \n"));
        let apply = script.find("\ngit apply -v -");
        assert!(
            reset.is_some() && reset < apply,
            "no bare reset before the test patch:\n{script}"
        );
    }
    package_agrees(
        "django/django",
        "4.2",
        &[(&old, id, "RESOLVED_NO")],
        f2p.clone(),
        p2p.clone(),
    );
    if let Some(python) = swebench5_python() {
        let case = as_swebench5(&json!({
            "instance_id": id,
            "repo": "django/django",
            "version": "4.2",
            "log_path": new.task_dir(id).join("test.log").display().to_string(),
            "FAIL_TO_PASS": f2p,
            "PASS_TO_PASS": p2p,
        }));
        let theirs = package_answer(&python, "swebench5_grade.py", &[case]);
        assert_eq!(
            theirs["results"][0]["resolution"], "RESOLVED_FULL",
            "{theirs}"
        );
    }
}

/// Under podman only: the reset is the harness's, the same through every
/// backend's workspace, and an image build per backend costs CI minutes.
#[test]
fn a_test_patch_that_only_adds_files_grades_as_each_package_grades_it_in_podman() {
    if Backend::Podman.ready() {
        a_test_patch_that_only_adds_files_grades_as_each_package_grades_it(Backend::Podman);
    }
}
