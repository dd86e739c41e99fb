//! Reading rows: Parquet written here (several row groups, nulls, a list
//! column, a large string, several codecs), JSON Lines and JSON arrays, in
//! order across files, numbered across the split, a bad row reported and
//! passed.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::{Value, json};

use crate::dataset::open::DataFile;
use crate::dataset::rows::Fields;
use crate::dataset::{Dataset, DatasetRef, RowError};

/// A row of the test schema: `tests` is a list column (`None`: null).
pub(crate) struct TaskRow<'a> {
    pub(crate) id: &'a str,
    pub(crate) problem: Option<&'a str>,
    pub(crate) number: Option<i64>,
    pub(crate) tests: Option<Vec<Option<&'a str>>>,
    pub(crate) score: Option<f64>,
    pub(crate) ok: Option<bool>,
    /// Days since 1970-01-01.
    pub(crate) day: Option<i32>,
}

const SCHEMA: &str = "
message task {
  required binary instance_id (UTF8);
  optional binary problem (UTF8);
  optional int64 number;
  optional group tests (LIST) {
    repeated group list {
      optional binary element (UTF8);
    }
  }
  optional double score;
  optional boolean ok;
  optional int32 day (DATE);
}";

/// Writes `groups` as one row group each into a Parquet file at `path`.
pub(crate) fn write_parquet(path: &Path, groups: &[&[TaskRow<'_>]], compression: Compression) {
    let schema = Arc::new(parse_message_type(SCHEMA).expect("schema"));
    let properties = Arc::new(
        WriterProperties::builder()
            .set_compression(compression)
            .build(),
    );
    let file = File::create(path).expect("create");
    let mut writer = SerializedFileWriter::new(file, schema, properties).expect("writer");
    for rows in groups {
        let mut group = writer.next_row_group().expect("group");
        let bytes = |s: &str| ByteArray::from(s);
        // instance_id: required.
        let mut column = group.next_column().expect("column").expect("id");
        let ids: Vec<ByteArray> = rows.iter().map(|r| bytes(r.id)).collect();
        column
            .typed::<ByteArrayType>()
            .write_batch(&ids, None, None)
            .expect("write");
        column.close().expect("close");
        // problem: optional text.
        let mut column = group.next_column().expect("column").expect("problem");
        let values: Vec<ByteArray> = rows.iter().filter_map(|r| r.problem.map(bytes)).collect();
        let levels: Vec<i16> = rows
            .iter()
            .map(|r| i16::from(r.problem.is_some()))
            .collect();
        column
            .typed::<ByteArrayType>()
            .write_batch(&values, Some(&levels), None)
            .expect("write");
        column.close().expect("close");
        let mut column = group.next_column().expect("column").expect("number");
        let values: Vec<i64> = rows.iter().filter_map(|r| r.number).collect();
        let levels: Vec<i16> = rows.iter().map(|r| i16::from(r.number.is_some())).collect();
        column
            .typed::<Int64Type>()
            .write_batch(&values, Some(&levels), None)
            .expect("write");
        column.close().expect("close");
        // tests: a list; definition 0 null list, 1 empty, 2 null item,
        // 3 an item; repetition 1 for each item after a list's first.
        let mut column = group.next_column().expect("column").expect("tests");
        let (mut values, mut defs, mut reps) = (Vec::new(), Vec::new(), Vec::new());
        for row in *rows {
            match &row.tests {
                None => (defs.push(0), reps.push(0)),
                Some(items) if items.is_empty() => (defs.push(1), reps.push(0)),
                Some(items) => {
                    for (i, item) in items.iter().enumerate() {
                        reps.push(i16::from(i > 0));
                        match item {
                            Some(text) => {
                                values.push(bytes(text));
                                defs.push(3);
                            }
                            None => defs.push(2),
                        }
                    }
                    ((), ())
                }
            };
        }
        column
            .typed::<ByteArrayType>()
            .write_batch(&values, Some(&defs), Some(&reps))
            .expect("write");
        column.close().expect("close");
        let mut column = group.next_column().expect("column").expect("score");
        let values: Vec<f64> = rows.iter().filter_map(|r| r.score).collect();
        let levels: Vec<i16> = rows.iter().map(|r| i16::from(r.score.is_some())).collect();
        column
            .typed::<DoubleType>()
            .write_batch(&values, Some(&levels), None)
            .expect("write");
        column.close().expect("close");
        let mut column = group.next_column().expect("column").expect("ok");
        let values: Vec<bool> = rows.iter().filter_map(|r| r.ok).collect();
        let levels: Vec<i16> = rows.iter().map(|r| i16::from(r.ok.is_some())).collect();
        column
            .typed::<BoolType>()
            .write_batch(&values, Some(&levels), None)
            .expect("write");
        column.close().expect("close");
        let mut column = group.next_column().expect("column").expect("day");
        let values: Vec<i32> = rows.iter().filter_map(|r| r.day).collect();
        let levels: Vec<i16> = rows.iter().map(|r| i16::from(r.day.is_some())).collect();
        column
            .typed::<Int32Type>()
            .write_batch(&values, Some(&levels), None)
            .expect("write");
        column.close().expect("close");
        group.close().expect("close group");
    }
    writer.close().expect("close file");
}

pub(crate) fn row<'a>(id: &'a str) -> TaskRow<'a> {
    TaskRow {
        id,
        problem: None,
        number: None,
        tests: None,
        score: None,
        ok: None,
        day: None,
    }
}

/// A dataset of local files, as `open` would hand it over.
pub(crate) fn local_dataset(files: &[(&str, &Path)]) -> Dataset {
    Dataset {
        reference: DatasetRef {
            repo: "o/n".into(),
            revision: Some(super::SHA.into()),
            split: Some("test".into()),
            alias: None,
        },
        sha: super::SHA.into(),
        split: "test".into(),
        files: files
            .iter()
            .map(|(path, local)| DataFile {
                path: (*path).to_owned(),
                local: local.to_path_buf(),
                sha256: None,
                oid: String::new(),
                size: 0,
            })
            .collect(),
        warnings: Vec::new(),
        folders: None,
    }
}

#[test]
fn parquet_rows_come_as_json_in_order_across_row_groups_and_codecs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let large = "x".repeat(300_000);
    let first = [
        TaskRow {
            problem: Some(&large),
            number: Some(7),
            tests: Some(vec![Some("t1"), None, Some("t3")]),
            score: Some(0.5),
            ok: Some(true),
            day: Some(19_723),
            ..row("a-1")
        },
        TaskRow {
            tests: Some(vec![]),
            score: Some(f64::NAN),
            ..row("a-2")
        },
    ];
    let second = [TaskRow {
        problem: Some("short"),
        tests: Some(vec![Some("only")]),
        ..row("a-3")
    }];
    let snappy = dir.path().join("snappy.parquet");
    write_parquet(&snappy, &[&first, &second], Compression::SNAPPY);
    let zstd = dir.path().join("zstd.parquet");
    write_parquet(
        &zstd,
        &[&[row("b-1")]],
        Compression::ZSTD(ZstdLevel::default()),
    );
    let gzip = dir.path().join("gzip.parquet");
    write_parquet(
        &gzip,
        &[&[row("c-1")], &[row("c-2")]],
        Compression::GZIP(GzipLevel::default()),
    );
    let lz4 = dir.path().join("lz4.parquet");
    write_parquet(&lz4, &[&[row("d-1")]], Compression::LZ4_RAW);

    let dataset = local_dataset(&[
        ("data/test-0.parquet", &snappy),
        ("data/test-1.parquet", &zstd),
        ("data/test-2.parquet", &gzip),
        ("data/test-3.parquet", &lz4),
    ]);
    let rows: Vec<(usize, Fields)> = dataset.rows().map(|r| r.expect("row")).collect();
    let ids: Vec<(usize, &str)> = rows
        .iter()
        .map(|(n, r)| (*n, r["instance_id"].as_str().expect("id")))
        .collect();
    assert_eq!(
        ids,
        [
            (1, "a-1"),
            (2, "a-2"),
            (3, "a-3"),
            (4, "b-1"),
            (5, "c-1"),
            (6, "c-2"),
            (7, "d-1")
        ]
    );
    let a1 = &rows[0].1;
    assert_eq!(a1["problem"].as_str().map(str::len), Some(300_000));
    assert_eq!(a1["number"], json!(7));
    assert_eq!(a1["tests"], json!(["t1", null, "t3"]));
    assert_eq!(a1["score"], json!(0.5));
    assert_eq!(a1["ok"], json!(true));
    assert_eq!(a1["day"], json!("2024-01-01"));
    let a2 = &rows[1].1;
    assert_eq!(a2["problem"], Value::Null);
    assert_eq!(a2["tests"], json!([]));
    // NaN has no JSON form.
    assert_eq!(a2["score"], Value::Null);
    assert_eq!(rows[2].1["tests"], json!(["only"]));
    assert_eq!(rows[3].1["tests"], Value::Null);
}

#[test]
fn jsonl_and_json_arrays_are_read_and_a_bad_row_is_reported_and_passed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = dir.path().join("a.jsonl");
    std::fs::write(&lines, "{\"id\": 1}\n\n{\"id\": 2\n[1]\n{\"id\": 3}").expect("write");
    let array = dir.path().join("b.json");
    std::fs::write(&array, "  [{\"id\": 4}, 5, {\"id\": 6}]").expect("write");
    let json_lines = dir.path().join("c.json");
    std::fs::write(&json_lines, "{\"id\": 7}\n{\"id\": 8}\n").expect("write");
    let broken = dir.path().join("d.json");
    std::fs::write(&broken, "[{\"id\": 9},").expect("write");
    let missing = dir.path().join("e.jsonl");
    let not_parquet = dir.path().join("f.parquet");
    std::fs::write(&not_parquet, "PAR?").expect("write");
    let after = dir.path().join("g.jsonl");
    std::fs::write(&after, "{\"id\": 10}\n").expect("write");
    let dataset = local_dataset(&[
        ("a.jsonl", &lines),
        ("b.json", &array),
        ("c.json", &json_lines),
        ("d.json", &broken),
        ("e.jsonl", &missing),
        ("f.parquet", &not_parquet),
        ("g.jsonl", &after),
    ]);
    let read: Vec<Result<(usize, Fields), RowError>> = dataset.rows().collect();
    let got: Vec<Result<(usize, i64), String>> = read
        .into_iter()
        .map(|r| {
            r.map(|(n, fields)| (n, fields["id"].as_i64().expect("id")))
                .map_err(|e| e.to_string())
        })
        .collect();
    let oks: Vec<(usize, i64)> = got
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    assert_eq!(
        oks,
        [(1, 1), (4, 3), (5, 4), (7, 6), (8, 7), (9, 8), (10, 10)]
    );
    let errors: Vec<&String> = got.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 6, "{errors:#?}");
    assert!(errors[0].starts_with("failed to read hf:o/n@1234567890abcdef1234567890abcdef12345678:test: row 2 (a.jsonl line 3): not JSON"), "{}", errors[0]);
    assert!(
        errors[1].contains("row 3 (a.jsonl line 4): not a JSON object but an array"),
        "{}",
        errors[1]
    );
    assert!(
        errors[2].contains("row 6 (b.json item 2): not a JSON object but a number"),
        "{}",
        errors[2]
    );
    assert!(
        errors[3].contains(": d.json: not a JSON array of objects"),
        "{}",
        errors[3]
    );
    assert!(
        errors[4].contains(": e.jsonl: cannot open"),
        "{}",
        errors[4]
    );
    assert!(
        errors[5].contains(": f.parquet: not a Parquet file"),
        "{}",
        errors[5]
    );
}

#[test]
fn a_codec_not_built_in_is_named() {
    use crate::dataset::rows::codec_refusal;
    assert!(codec_refusal(Compression::SNAPPY).is_none());
    assert!(codec_refusal(Compression::ZSTD(ZstdLevel::default())).is_none());
    let brotli = codec_refusal(Compression::BROTLI(Default::default()))
        .expect("refused")
        .to_string();
    assert!(
        brotli.contains("BROTLI") && brotli.contains("built without"),
        "{brotli}"
    );
    assert!(codec_refusal(Compression::LZO).is_some());
}
