//! SWE-bench's verdicts, checked against the `swebench` package itself:
//! recorded eval logs of every log parser the Python repos use (oracle,
//! noop and partial runs, tests/fixtures/swebench-logs/) go through
//! onebash's parser and grading and through the package's
//! `MAP_REPO_TO_PARSER`, `get_logs_eval`, `get_eval_tests_report`,
//! `get_resolution_status` and `get_eval_report`; statuses and verdicts
//! must be the same.

use std::path::{Path, PathBuf};
use std::process::Command;

use onebash::swebench_log::{StatusMap, grade_output};
use onebash::swebench_spec::{eval_for, image_name};
use serde_json::{Value, json};

use crate::support::backend::{Backend, under_each_backend};
use crate::support::harness::swebench_python;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/swebench-logs")
}

/// The cases of cases.json, their log paths made absolute.
fn cases() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures().join("cases.json")).expect("cases.json");
    let mut cases: Vec<Value> = serde_json::from_str(&text).expect("a JSON list");
    for case in &mut cases {
        let log = fixtures().join(case["log"].as_str().expect("log"));
        case["log_path"] = json!(log.display().to_string());
    }
    cases
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
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("cases.json");
    std::fs::write(&input, serde_json::to_vec(cases).expect("json")).expect("write");
    let output = Command::new(python)
        .arg(fixtures().join("swebench_grade.py"))
        .arg(&input)
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("the script's JSON")
}

/// onebash's reading of one case: statuses, resolution, resolved.
fn onebash(case: &Value) -> (StatusMap, String, bool) {
    let repo = case["repo"].as_str().expect("repo");
    let version = case["version"].as_str().expect("version");
    let eval = eval_for(repo, version, "").unwrap_or_else(|err| panic!("{repo}: {err}"));
    let log = std::fs::read_to_string(case["log_path"].as_str().expect("path")).expect("log");
    let graded = grade_output(
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
        Some(onebash::swebench_spec::specs().swebench_version.as_str()),
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

/// A django-shaped repo: SWE-bench's django recipe runs
/// `./tests/runtests.py --verbosity 2 ... MODULES`; this one runs
/// unittest on the modules it is given, as verbosely.
const RUNTESTS: &str = r#"#!/usr/bin/env python3
import os, sys, unittest
here = os.path.dirname(os.path.abspath(__file__))
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
result = unittest.TextTestRunner(verbosity=2).run(suite)
sys.exit(not result.wasSuccessful())
"#;
const CALC: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";
const VISIBLE: &str = "import unittest\nfrom calc import sub\n\n\nclass CalcTests(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n";
const HIDDEN: &str = "import unittest\nfrom calc import add, mul, sub\n\n\nclass CalcTests(unittest.TestCase):\n    def test_sub(self):\n        self.assertEqual(sub(3, 1), 2)\n\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n";

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
) -> Vec<String> {
    use crate::support::harness::{git, path_arg};
    let context = fixture.path("image");
    std::fs::create_dir_all(&context).expect("mkdir");
    let testbed = context.join("testbed");
    git(
        &context,
        &["clone", "-q", path_arg(work), path_arg(&testbed)],
    );
    git(&testbed, &["checkout", "-q", "--detach", base]);
    std::fs::write(context.join("Containerfile"), SWEBENCH_SHAPED).expect("write");
    let mut build = Command::new("podman");
    build.args(["build", "-q"]);
    for id in ids {
        build.args(["-t", &format!("swebench/{}:latest", image_name(id))]);
    }
    let built = build.arg(&context).output().expect("podman build");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let template = r#"sweb.eval.x86_64.{{ instance_id | lower | replace("__", "_1776_") }}"#;
    if backend == Backend::Podman {
        return backend.image_flags(fixture, &format!("swebench/{template}:latest"));
    }
    let tag = format!("swebench/{}:latest", image_name(ids[0]));
    let flags = backend.image_flags(fixture, &tag);
    let archive = flags[3]
        .strip_prefix("docker-archive:")
        .expect("an archive");
    let named = fixture.path("named");
    std::fs::create_dir_all(&named).expect("mkdir");
    for id in ids {
        let link = named.join(format!("{}.tar", image_name(id)));
        std::os::unix::fs::symlink(archive, link).expect("symlink");
    }
    let image = format!("docker-archive:{}/{template}.tar", named.display());
    ["--env", "oci", "--image", &image]
        .map(str::to_owned)
        .to_vec()
}

/// Four django instances graded by SWE-bench's django 4.2 recipe, on the
/// host or in SWE-bench-shaped images: a scripted whole fix, a partial
/// one, none, one of a version with no recipe, and the oracle; each
/// verdict and status must be the package's on onebash's test log.
/// Returns the test log of the whole fix.
fn django_instances_match_the_package(in_image: Option<Backend>) -> String {
    use crate::support::harness::{Fixture, diff_of, git, scripted_agent, unittest_name};
    let fixture = Fixture::new();
    // The mirror is django/django.git under --repo-base, so the instance
    // is graded by SWE-bench's django 4.2 recipe: no test command given.
    let (work, sha) = fixture.repo(
        "work",
        &[
            ("calc.py", CALC),
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
    let sha_x = git(&work, &["rev-parse", "HEAD"]);
    assert_ne!(sha, sha_x);
    let mirrors = fixture.mirrors(&work, "django/django");
    let gold = diff_of(
        &work,
        &[(
            "calc.py",
            &CALC.replacen("a - b", "a + b", 1).replacen(
                "a + b\n\n\ndef sub",
                "a * b\n\n\ndef sub",
                1,
            ),
        )],
    );
    let test_patch = diff_of(&work, &[("tests/calc_tests/tests.py", HIDDEN)]);
    let f2p = vec![
        unittest_name("calc_tests.tests.CalcTests", "test_add"),
        unittest_name("calc_tests.tests.CalcTests", "test_mul"),
    ];
    let p2p = vec![unittest_name("calc_tests.tests.CalcTests", "test_sub")];
    let instance = |id: &str, version: &str| {
        json!({
            "instance_id": id,
            "repo": "django/django",
            "base_commit": sha_x,
            "problem_statement": format!("Problem of task {id}. add() subtracts and mul() adds."),
            "patch": gold,
            "test_patch": test_patch,
            "FAIL_TO_PASS": json!(f2p).to_string(),
            "PASS_TO_PASS": json!(p2p).to_string(),
            "version": version,
        })
    };
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
    let extra = match in_image {
        Some(backend) => swebench_shaped_image(&fixture, &work, &sha_x, &ids, backend),
        None => Vec::new(),
    };
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
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
        assert_eq!(
            tests["verdict"]["resolution"], resolution,
            "{id}: {tests}\n{log}"
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
    let Some(python) = swebench_python() else {
        return log;
    };
    let cases: Vec<Value> = graded
        .iter()
        .map(|(run, id, _)| {
            json!({
                "instance_id": id,
                "repo": "django/django",
                "version": "4.2",
                "log_path": run.task_dir(id).join("test.log").display().to_string(),
                "FAIL_TO_PASS": f2p,
                "PASS_TO_PASS": p2p,
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
        // Every status onebash read is the package's.
        let ours = &run.tests_json(id)["statuses"];
        for (test, status) in ours.as_object().expect("statuses") {
            assert_eq!(&theirs["statuses"][test], status, "{id}: {test}");
        }
        assert_eq!(
            ours.as_object().map(|o| o.len()),
            theirs["statuses"].as_object().map(|o| o.len()),
            "{id}: {ours} vs {theirs}"
        );
    }
    log
}
