//! The files a dataset's split is made of, written from JSON rows: Parquet
//! (as the Hub's datasets mostly are, through the `parquet` crate's own
//! writer) and JSON Lines. Owns the mapping of a row's fields to columns;
//! what the Hub serves them as is `hub.rs`'s.

use std::sync::Arc;

use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use serde_json::Value;

/// The text a field is stored as: a string as it is, a list or an object
/// as its JSON (SWE-bench keeps `FAIL_TO_PASS` so, a JSON string), a
/// number or a bool as its JSON text; `None` for null or absent.
fn cell(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::Null => None,
        Value::String(text) => Some(text.clone()),
        other => Some(other.to_string()),
    }
}

/// The columns of `rows`: every field name, in the order first seen.
fn columns(rows: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for row in rows {
        for name in row.as_object().expect("a row is a JSON object").keys() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// A Parquet file of `rows` (JSON objects): one optional UTF-8 column per
/// field ([`cell`] says how a value is stored; absent is null), SNAPPY
/// compression, one row group.
pub fn parquet_of(rows: &[Value]) -> Vec<u8> {
    let names = columns(rows);
    let fields: String = names
        .iter()
        .map(|name| format!("  optional binary {name} (UTF8);\n"))
        .collect();
    let schema = parse_message_type(&format!("message rows {{\n{fields}}}\n"))
        .expect("a Parquet schema of the rows' fields");
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut file = Vec::new();
    let mut writer = SerializedFileWriter::new(&mut file, Arc::new(schema), Arc::new(properties))
        .expect("a Parquet writer");
    let mut group = writer.next_row_group().expect("a row group");
    for name in &names {
        let cells: Vec<Option<String>> = rows.iter().map(|row| cell(row.get(name))).collect();
        let values: Vec<ByteArray> = cells
            .iter()
            .flatten()
            .map(|text| ByteArray::from(text.as_str()))
            .collect();
        let levels: Vec<i16> = cells.iter().map(|c| i16::from(c.is_some())).collect();
        let mut column = group
            .next_column()
            .expect("the next column")
            .expect("a column per field");
        column
            .typed::<ByteArrayType>()
            .write_batch(&values, Some(&levels), None)
            .expect("write a column");
        column.close().expect("close a column");
    }
    group.close().expect("close the row group");
    writer.close().expect("close the Parquet file");
    file
}

/// A JSON Lines file of `rows`, one object a line.
pub fn jsonl_of(rows: &[Value]) -> Vec<u8> {
    rows.iter()
        .map(|row| format!("{row}\n"))
        .collect::<String>()
        .into_bytes()
}
