//! SWE-bench's reading of a test log and its verdict, line for line.
//!
//! Owns the package's log parsers (`swebench.harness.log_parsers`: which
//! repo uses which is data, spec.rs's), one file per language
//! family (python.rs; javascript.rs; java.rs; native.rs for C/C++, Go and
//! Rust; php_ruby.rs), and its grading (grading.rs). Each mirrors the
//! package's Python, quirks included (the last line about a test wins, a
//! skipped test counts neither way, a test missing from the log fails),
//! so a verdict here is the one SWE-bench gives;
//! `tests/it/swebench_parity.rs` checks that against the package itself.
//! Where the package's parser would raise on a log (an unmatched line it
//! indexes anyway, XML that does not parse), onebash reads nothing from
//! that line or block instead. Patterns are Rust's `regex` with Python's
//! `\s` (U+001C..U+001F are whitespace to it); `str.strip` and `str.split`
//! are mirrored exactly. onebash's own per-test reading, for
//! tasks without a spec, is testlog.rs's.

use serde::Serialize;

use super::Rules;
use super::lines::StatusMap;

/// What SWE-bench's eval script echoes around the test command (through
/// `set -x`); the log is read between them.
pub const START_TEST_OUTPUT: &str = ">>>>> Start Test Output";
pub const END_TEST_OUTPUT: &str = ">>>>> End Test Output";

/// One of the package's log parsers, by what it does (several repos
/// share each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Parser {
    /// `parse_log_pytest`: the `-rA` summary lines (flask, xarray,
    /// pytest, astroid, marshmallow, pvlib, pyvista, sqlfluff).
    Pytest,
    /// `parse_log_pytest_options`: as pytest, a path-like parameter cut to
    /// its last component (requests, pylint, pydicom).
    PytestOptions,
    /// `parse_log_pytest_v2`: colour codes and control characters out,
    /// and `name STATUS` lines too (astropy, scikit-learn, sphinx).
    PytestV2,
    /// `parse_log_django`: the runner's `name ... ok` lines.
    Django,
    /// `parse_log_seaborn`.
    Seaborn,
    /// `parse_log_sympy`: `bin/test`'s `test_x ok` lines and its failure
    /// headers.
    Sympy,
    /// `parse_log_matplotlib`: pytest with `MouseButton` ids as numbers.
    Matplotlib,
    /// `parse_log_calypso`: jest's verbose tree, suites by indentation.
    Calypso,
    /// `parse_log_chart_js`: karma's `Chrome ... FAILED` lines (a
    /// fail-only repo).
    ChartJs,
    /// `parse_log_marked`: mocha's numbered failures (fail-only).
    Marked,
    /// `parse_log_p5js`: mocha's numbered failures, JSON and XML blocks
    /// out (fail-only).
    P5js,
    /// `parse_log_react_pdf`: jest's `PASS`/`FAIL` file lines.
    ReactPdf,
    /// `parse_log_jest`: jest `--verbose` (babel, docusaurus,
    /// immutable-js 2006).
    Jest,
    /// `parse_log_jest_json`: `[PASSED] name` lines (immutable-js 2005).
    JestJson,
    /// `parse_log_vitest`: vitest's verbose reporter (vue).
    Vitest,
    /// `parse_log_karma`: karma's tree of ✔/✖ (preact).
    Karma,
    /// `parse_log_tap`: TAP's `ok N name` (axios, three.js).
    Tap,
    /// `parse_log_maven`: `BUILD SUCCESS|FAILURE` of each `-Dtest=` run.
    Maven,
    /// `parse_log_ant`: `[junit] [PASS] name` (lombok).
    Ant,
    /// `parse_log_gradle_custom`: `name PASSED|FAILED` (lucene, rxjava).
    GradleCustom,
    /// `parse_log_gotest`: `--- PASS: name (0.00s)`.
    GoTest,
    /// `parse_log_cargo`: `test name ... ok`.
    Cargo,
    /// `parse_log_phpunit`: `--testdox`'s ✔/✘/↩ under their suite.
    Phpunit,
    /// `parse_log_redis`: `[ok]: name (N ms)` (redis, valkey).
    Redis,
    /// `parse_log_jq`: `PASS: name`.
    Jq,
    /// `parse_log_doctest`: doctest's XML reporter (nlohmann/json).
    Doctest,
    /// `parse_log_micropython_test`: `pass name`.
    Micropython,
    /// `parse_log_googletest`: `[       OK ] name (N ms)` (fmt).
    Googletest,
    /// `parse_log_minitest` (jekyll 9141, 8047, 8167).
    Minitest,
    /// `parse_log_cucumber` (jekyll 8761, 8771).
    Cucumber,
    /// `parse_log_ruby_unit`: test-unit's `name: .` (fluentd, faker).
    RubyUnit,
    /// `parse_log_rspec_transformed_json`: `name - passed` (fastlane, fpm,
    /// rubocop).
    RspecTransformedJson,
}

/// Why an instance's parser cannot be chosen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParserError {
    #[error("onebash has no SWE-bench log parser {0}")]
    Unknown(String),
    /// The package picks jekyll's and immutable-js's parser by the
    /// instance's number and raises on any other.
    #[error("SWE-bench's {parser} knows no instance {instance}")]
    Instance { parser: String, instance: String },
    /// A parser of 5.0.2's registry that onebash has only as 4.1.0 wrote
    /// it, or not at all.
    #[error(
        "onebash cannot read logs as swebench 5.0.2's log parser {0} does (it mirrors 4.1.0's parsers and the ones 5.0.2 changed among them, not this one)"
    )]
    Unmirrored(String),
}

/// The parser a swebench 5 row names (`log_parser`, a key of 5.0.2's
/// `PARSER_REGISTRY`), where onebash reads logs as that function does:
/// the names 4.1.0 had, whose function 5.0.2 kept or changed in a way
/// onebash mirrors ([`Parser::parse_as`]), and the registry's aliases of
/// them (`parse_log_flask` is `parse_log_pytest`). maven's and
/// gradle_custom's changed otherwise, and the parsers new in 5.0 are not
/// mirrored: [`ParserError::Unmirrored`].
pub fn parser_for_5(name: &str, instance_id: &str) -> Result<Parser, ParserError> {
    let canonical = match name {
        "parse_log_astroid"
        | "parse_log_flask"
        | "parse_log_marshmallow"
        | "parse_log_pvlib"
        | "parse_log_pyvista"
        | "parse_log_sqlfluff"
        | "parse_log_xarray" => "parse_log_pytest",
        "parse_log_pydicom" | "parse_log_requests" | "parse_log_pylint" => {
            "parse_log_pytest_options"
        }
        "parse_log_astropy" | "parse_log_scikit" | "parse_log_sphinx" => "parse_log_pytest_v2",
        other => other,
    };
    match parser_for(canonical, instance_id) {
        Ok(parser) if parser.mirrors(Rules::Swebench50) => Ok(parser),
        Ok(_) | Err(ParserError::Unknown(_)) => Err(ParserError::Unmirrored(name.to_owned())),
        Err(err) => Err(err),
    }
}

/// The parser the package's `MAP_REPO_TO_PARSER` function `name` applies
/// to instance `instance_id`: the function itself, or for the two that
/// dispatch on the instance's number, the one they call.
pub fn parser_for(name: &str, instance_id: &str) -> Result<Parser, ParserError> {
    let unknown = || ParserError::Instance {
        parser: name.to_owned(),
        instance: instance_id.to_owned(),
    };
    match name {
        "parse_log_jekyll" => {
            // `instance_id.split("-")[1]`.
            match instance_id.split('-').nth(1) {
                Some("9141" | "8047" | "8167") => Ok(Parser::Minitest),
                Some("8761" | "8771") => Ok(Parser::Cucumber),
                _ => Err(unknown()),
            }
        }
        "parse_log_immutable_js" => match instance_id.rsplit('-').next() {
            Some("2006") => Ok(Parser::Jest),
            Some("2005") => Ok(Parser::JestJson),
            _ => Err(unknown()),
        },
        _ => Parser::from_name(name).ok_or_else(|| ParserError::Unknown(name.to_owned())),
    }
}

impl Parser {
    /// The parser of the package's function name (the data's `parser`);
    /// the two that depend on the instance are [`parser_for`]'s.
    pub fn from_name(name: &str) -> Option<Parser> {
        let name = name.strip_prefix("parse_log_")?;
        Some(match name {
            "pytest" => Parser::Pytest,
            "pytest_options" => Parser::PytestOptions,
            "pytest_v2" => Parser::PytestV2,
            "django" => Parser::Django,
            "seaborn" => Parser::Seaborn,
            "sympy" => Parser::Sympy,
            "matplotlib" => Parser::Matplotlib,
            "calypso" => Parser::Calypso,
            "chart_js" => Parser::ChartJs,
            "marked" => Parser::Marked,
            "p5js" => Parser::P5js,
            "react_pdf" => Parser::ReactPdf,
            "jest" => Parser::Jest,
            "jest_json" => Parser::JestJson,
            "vitest" => Parser::Vitest,
            "karma" => Parser::Karma,
            "tap" => Parser::Tap,
            "maven" => Parser::Maven,
            "ant" => Parser::Ant,
            "gradle_custom" => Parser::GradleCustom,
            "gotest" => Parser::GoTest,
            "cargo" => Parser::Cargo,
            "phpunit" => Parser::Phpunit,
            "redis" => Parser::Redis,
            "jq" => Parser::Jq,
            "doctest" => Parser::Doctest,
            "micropython_test" => Parser::Micropython,
            "googletest" => Parser::Googletest,
            "minitest" => Parser::Minitest,
            "cucumber" => Parser::Cucumber,
            "ruby_unit" => Parser::RubyUnit,
            "rspec_transformed_json" => Parser::RspecTransformedJson,
            _ => return None,
        })
    }

    /// Whether [`Parser::parse_as`] reads as the package of `rules` does:
    /// always for 4.1; for 5.0 all but maven's and gradle_custom's, which
    /// 5.0.2 rewrote to pair results with interleaved test lines.
    pub fn mirrors(self, rules: Rules) -> bool {
        rules == Rules::Swebench41 || !matches!(self, Parser::Maven | Parser::GradleCustom)
    }

    /// Reads statuses out of `log` as 4.1.0's function does.
    pub fn parse(self, log: &str) -> StatusMap {
        self.parse_as(Rules::Swebench41, log)
    }

    /// Reads statuses out of `log` as the function of the package whose
    /// rules are `rules` does. 5.0.2 changed pytest's parsers (`SKIPPED
    /// [N]` summaries left out; pytest_v2's ids whole) and jest's (names
    /// stripped), which onebash mirrors, and maven's and gradle_custom's
    /// (results matched to interleaved test lines), which it does not:
    /// those two read as 4.1.0's under either rules ([`Parser::mirrors`]).
    pub fn parse_as(self, rules: Rules, log: &str) -> StatusMap {
        use super::{java as jv, javascript as js, native as nt, php_ruby as pr, python as py};
        let v5 = rules == Rules::Swebench50;
        match self {
            Parser::Pytest => py::pytest(log, v5, |line| line.to_owned(), |name| name.to_owned()),
            Parser::PytestOptions => py::pytest(log, v5, |line| line.to_owned(), py::cut_option),
            Parser::Matplotlib => py::pytest(
                log,
                v5,
                |line| {
                    line.replace("MouseButton.LEFT", "1")
                        .replace("MouseButton.RIGHT", "3")
                },
                |name| name.to_owned(),
            ),
            Parser::PytestV2 => py::pytest_v2(log, v5),
            Parser::Django => py::django(log),
            Parser::Seaborn => py::seaborn(log),
            Parser::Sympy => py::sympy(log),
            Parser::Calypso => js::calypso(log),
            Parser::ChartJs => js::chart_js(log),
            Parser::Marked => js::marked(log),
            Parser::P5js => js::p5js(log),
            Parser::ReactPdf => js::react_pdf(log),
            Parser::Jest => js::jest(log, v5),
            Parser::JestJson => js::jest_json(log),
            Parser::Vitest => js::vitest(log),
            Parser::Karma => js::karma(log),
            Parser::Tap => js::tap(log),
            Parser::Maven => jv::maven(log),
            Parser::Ant => jv::ant(log),
            Parser::GradleCustom => jv::gradle_custom(log),
            Parser::GoTest => nt::gotest(log),
            Parser::Cargo => nt::cargo(log),
            Parser::Redis => nt::redis(log),
            Parser::Jq => nt::jq(log),
            Parser::Doctest => nt::doctest(log),
            Parser::Micropython => nt::micropython(log),
            Parser::Googletest => nt::googletest(log),
            Parser::Phpunit => pr::phpunit(log),
            Parser::Minitest => pr::minitest(log),
            Parser::Cucumber => pr::cucumber(log),
            Parser::RubyUnit => pr::ruby_unit(log),
            Parser::RspecTransformedJson => pr::rspec_transformed_json(log),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::grade::swebench::lines::python_classes;

    pub(crate) fn map(pairs: &[(&str, &str)]) -> StatusMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// Checks each `(log, statuses)` case of a parser.
    pub(crate) fn table(parser: Parser, cases: &[(&str, &[(&str, &str)])]) {
        for (log, expected) in cases {
            assert_eq!(parser.parse(log), map(expected), "{parser:?} on {log:?}");
        }
    }

    #[test]
    fn whitespace_classes_are_python_s() {
        assert_eq!(
            python_classes(r"^\s+(\S+)$"),
            r"^[\s\x1C-\x1F]+([^\s\x1C-\x1F]+)$"
        );
        assert_eq!(
            python_classes(r"[^\s\]][\s--[\r\n]]\\s"),
            r"[^\s\x1C-\x1F\]][\s\x1C-\x1F--[\r\n]]\\s"
        );
        // What the package reads where a separator stands for a space.
        table(
            Parser::Jest,
            &[("  ✓\u{1c}name one (3 ms)\n", &[("name one", "PASSED")])],
        );
        table(
            Parser::Redis,
            &[("[err]: t in\u{1c}file\n", &[("t", "FAILED")])],
        );
        table(
            Parser::Maven,
            &[("+ mvn -Dtest=a\u{1c}b\nBUILD SUCCESS\n", &[("a", "PASSED")])],
        );
        table(
            Parser::ChartJs,
            &[(
                "Chrome 1.0\u{1c}(Linux)\u{1c}my test FAILED\n",
                &[("my test ", "FAILED")],
            )],
        );
    }

    #[test]
    fn every_parser_has_its_package_name() {
        for name in [
            "parse_log_pytest",
            "parse_log_calypso",
            "parse_log_p5js",
            "parse_log_gotest",
            "parse_log_micropython_test",
            "parse_log_rspec_transformed_json",
        ] {
            assert!(Parser::from_name(name).is_some(), "{name}");
        }
        assert_eq!(Parser::from_name("parse_log_jekyll"), None);
        assert_eq!(
            parser_for("parse_log_jekyll", "jekyll__jekyll-9141"),
            Ok(Parser::Minitest)
        );
        assert_eq!(
            parser_for("parse_log_jekyll", "jekyll__jekyll-8771"),
            Ok(Parser::Cucumber)
        );
        assert_eq!(
            parser_for("parse_log_immutable_js", "immutable-js__immutable-js-2005"),
            Ok(Parser::JestJson)
        );
        let err = parser_for("parse_log_jekyll", "jekyll__jekyll-1").expect_err("unknown");
        assert_eq!(
            err.to_string(),
            "SWE-bench's parse_log_jekyll knows no instance jekyll__jekyll-1"
        );
        assert!(matches!(
            parser_for("parse_log_x", "i"),
            Err(ParserError::Unknown(_))
        ));
    }
}
