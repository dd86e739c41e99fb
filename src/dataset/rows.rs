//! The rows of an opened split ([`Dataset::rows`]): its files in order,
//! each read one row at a time, whatever its format: Parquet (the record
//! API: no Arrow, and no copy of the whole file in memory), JSON Lines,
//! or JSON (an array of objects, or JSON Lines under a `.json` name).
//!
//! Owns turning a Parquet value into JSON (lists to arrays, groups and
//! maps to objects, dates and timestamps to RFC 3339 strings, bytes to a
//! string when UTF-8, else base64) and numbering rows across the split.
//! A bad row is an error naming its number and reading goes on; a file
//! that cannot be read is one error.

use std::fs::File;
use std::io::{BufRead as _, BufReader, Read as _, Seek as _};

use base64::Engine as _;
use parquet::basic::Compression;
use parquet::file::reader::FileReader as _;
use parquet::file::serialized_reader::SerializedFileReader;
use parquet::record::reader::RowIter;
use parquet::record::{Field, Row};
use serde_json::{Map, Number, Value};

use crate::dataset::cache;
use crate::dataset::error::{RowError, RowFault};
use crate::dataset::open::{DataFile, Dataset};

/// One row: its fields by name.
pub(crate) type Fields = Map<String, Value>;

impl Dataset {
    /// The rows of the split in order (files by path, then as each file
    /// has them), numbered from 1 across the split.
    pub(crate) fn rows(&self) -> impl Iterator<Item = Result<(usize, Fields), RowError>> + '_ {
        Rows {
            dataset: self.reference.to_string(),
            files: self.files.iter(),
            current: None,
            number: 0,
        }
    }
}

struct Rows<'a> {
    dataset: String,
    files: std::slice::Iter<'a, DataFile>,
    current: Option<(&'a DataFile, FileRows)>,
    number: usize,
}

/// Where a file's reader is.
enum FileRows {
    Lines {
        reader: BufReader<File>,
        line: usize,
    },
    Array {
        items: std::vec::IntoIter<Value>,
        index: usize,
    },
    Parquet {
        rows: Box<RowIter<'static>>,
        index: usize,
    },
}

/// What a file gave next: a row, a bad row (reading goes on) or a fault
/// after which the file cannot be read further.
enum Next {
    Row(Fields),
    Bad(String, RowFault),
    Broken(String, RowFault),
}

impl Iterator for Rows<'_> {
    type Item = Result<(usize, Fields), RowError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let Some((file, reader)) = &mut self.current else {
                let file = self.files.next()?;
                match open_file(file) {
                    Ok(reader) => self.current = Some((file, reader)),
                    Err(why) => {
                        return Some(Err(RowError {
                            dataset: self.dataset.clone(),
                            row: None,
                            place: file.path.clone(),
                            why,
                        }));
                    }
                }
                continue;
            };
            let path = file.path.as_str();
            let Some(next) = reader.next(path) else {
                self.current = None;
                continue;
            };
            self.number += 1;
            let error = |place, why| RowError {
                dataset: self.dataset.clone(),
                row: Some(self.number),
                place,
                why,
            };
            return Some(match next {
                Next::Row(fields) => Ok((self.number, fields)),
                Next::Bad(place, why) => Err(error(place, why)),
                Next::Broken(place, why) => {
                    let err = error(place, why);
                    self.current = None;
                    Err(err)
                }
            });
        }
    }
}

/// The reader of a file, by its extension and, for `.json`, its first
/// character.
fn open_file(file: &DataFile) -> Result<FileRows, RowFault> {
    let mut handle = File::open(&file.local).map_err(|source| RowFault::Open {
        path: file.local.clone(),
        source,
    })?;
    if file.path.ends_with(".parquet") {
        return open_parquet(handle);
    }
    if file.path.ends_with(".json") && first_byte(&mut handle)? == Some(b'[') {
        let items: Vec<Value> =
            serde_json::from_reader(BufReader::new(handle)).map_err(RowFault::NotArray)?;
        return Ok(FileRows::Array {
            items: items.into_iter(),
            index: 0,
        });
    }
    Ok(FileRows::Lines {
        reader: BufReader::new(handle),
        line: 0,
    })
}

/// The first byte past white space, the file then rewound.
fn first_byte(handle: &mut File) -> Result<Option<u8>, RowFault> {
    let mut reader = BufReader::new(&mut *handle);
    let mut found = None;
    let mut byte = [0u8];
    while reader.read(&mut byte).map_err(RowFault::Read)? == 1 {
        if !byte[0].is_ascii_whitespace() {
            found = Some(byte[0]);
            break;
        }
    }
    drop(reader);
    handle.rewind().map_err(RowFault::Read)?;
    Ok(found)
}

/// Why a file compressed with `codec` cannot be read, when this build of
/// the `parquet` crate lacks it (Brotli: rare on the Hub and slow to
/// build; LZO: the crate has none).
pub(crate) fn codec_refusal(codec: Compression) -> Option<RowFault> {
    let name = match codec {
        Compression::UNCOMPRESSED
        | Compression::SNAPPY
        | Compression::GZIP(_)
        | Compression::LZ4
        | Compression::LZ4_RAW
        | Compression::ZSTD(_) => return None,
        Compression::BROTLI(_) => "BROTLI",
        Compression::LZO => "LZO",
    };
    Some(RowFault::Codec { codec: name })
}

fn open_parquet(handle: File) -> Result<FileRows, RowFault> {
    let reader = SerializedFileReader::new(handle).map_err(RowFault::NotParquet)?;
    let refusal = reader
        .metadata()
        .row_groups()
        .iter()
        .flat_map(|group| group.columns())
        .find_map(|column| codec_refusal(column.compression()));
    if let Some(refusal) = refusal {
        return Err(refusal);
    }
    Ok(FileRows::Parquet {
        rows: Box::new(reader.into_iter()),
        index: 0,
    })
}

impl FileRows {
    fn next(&mut self, path: &str) -> Option<Next> {
        match self {
            FileRows::Lines { reader, line } => {
                let mut bytes = Vec::new();
                loop {
                    bytes.clear();
                    *line += 1;
                    let place = format!("{path} line {line}");
                    match reader.read_until(b'\n', &mut bytes) {
                        Ok(0) => return None,
                        Ok(_) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
                        Ok(_) => {
                            return Some(match serde_json::from_slice::<Value>(&bytes) {
                                Ok(Value::Object(fields)) => Next::Row(fields),
                                Ok(other) => {
                                    Next::Bad(place, RowFault::NotObject { kind: kind(&other) })
                                }
                                Err(err) => Next::Bad(place, RowFault::NotJson(err)),
                            });
                        }
                        Err(err) => {
                            return Some(Next::Broken(place, RowFault::Read(err)));
                        }
                    }
                }
            }
            FileRows::Array { items, index } => {
                let item = items.next()?;
                *index += 1;
                let place = format!("{path} item {index}");
                Some(match item {
                    Value::Object(fields) => Next::Row(fields),
                    other => Next::Bad(place, RowFault::NotObject { kind: kind(&other) }),
                })
            }
            FileRows::Parquet { rows, index } => {
                let row = rows.next()?;
                *index += 1;
                let place = format!("{path} row {index}");
                Some(match row {
                    Ok(row) => Next::Row(row_fields(row)),
                    Err(err) => Next::Broken(place, RowFault::ParquetRow(err)),
                })
            }
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A Parquet row as JSON fields, moved rather than copied (a row's text
/// fields can be large).
fn row_fields(row: Row) -> Fields {
    row.into_columns()
        .into_iter()
        .map(|(name, field)| (name, into_value(field)))
        .collect()
}

fn into_value(field: Field) -> Value {
    match field {
        Field::Str(text) => Value::String(text),
        Field::Group(row) => Value::Object(row_fields(row)),
        other => to_value(&other),
    }
}

fn to_value(field: &Field) -> Value {
    match field {
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Byte(n) => Value::from(*n),
        Field::Short(n) => Value::from(*n),
        Field::Int(n) => Value::from(*n),
        Field::Long(n) => Value::from(*n),
        Field::UByte(n) => Value::from(*n),
        Field::UShort(n) => Value::from(*n),
        Field::UInt(n) => Value::from(*n),
        Field::ULong(n) => Value::from(*n),
        Field::Float16(n) => float(f64::from(f32::from(*n))),
        Field::Float(n) => float(f64::from(*n)),
        Field::Double(n) => float(*n),
        Field::Decimal(decimal) => {
            // The crate's own text of a decimal asserts these.
            if decimal.scale() >= 0 && decimal.precision() >= decimal.scale() {
                Value::String(field.to_string())
            } else {
                Value::String(cache::hex(decimal.data()))
            }
        }
        Field::Str(text) => Value::String(text.clone()),
        Field::Bytes(bytes) => match std::str::from_utf8(bytes.data()) {
            Ok(text) => Value::String(text.to_owned()),
            Err(_) => Value::String(base64::engine::general_purpose::STANDARD.encode(bytes.data())),
        },
        Field::Date(days) => Value::String(date(i64::from(*days))),
        Field::TimeMillis(ms) => Value::String(time_of_day(i64::from(*ms) * 1_000, 3)),
        Field::TimeMicros(us) => Value::String(time_of_day(*us, 6)),
        Field::TimestampMillis(ms) => Value::String(timestamp(
            ms.div_euclid(1_000),
            ms.rem_euclid(1_000) * 1_000,
            3,
        )),
        Field::TimestampMicros(us) => Value::String(timestamp(
            us.div_euclid(1_000_000),
            us.rem_euclid(1_000_000),
            6,
        )),
        Field::Group(row) => Value::Object(
            row.get_column_iter()
                .map(|(name, field)| (name.clone(), to_value(field)))
                .collect(),
        ),
        Field::ListInternal(list) => Value::Array(list.elements().iter().map(to_value).collect()),
        Field::MapInternal(map) => Value::Object(
            map.entries()
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        Field::Str(text) => text.clone(),
                        other => to_value(other).to_string(),
                    };
                    (key, to_value(value))
                })
                .collect(),
        ),
    }
}

/// A float as a JSON number; NaN and the infinities, which JSON lacks,
/// as null.
fn float(n: f64) -> Value {
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01 (the proleptic
/// Gregorian calendar; Howard Hinnant's `civil_from_days`).
fn date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// `HH:MM:SS.fff` (or `.ffffff`) of microseconds since midnight.
fn time_of_day(micros: i64, digits: usize) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let fraction = if digits == 3 {
        format!("{:03}", fraction / 1_000)
    } else {
        format!("{fraction:06}")
    };
    format!(
        "{:02}:{:02}:{:02}.{fraction}",
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// RFC 3339 in UTC of `seconds` since the epoch and `micros` more.
fn timestamp(seconds: i64, micros: i64, digits: usize) -> String {
    let day = seconds.div_euclid(86_400);
    let time = time_of_day(seconds.rem_euclid(86_400) * 1_000_000 + micros, digits);
    format!("{}T{time}Z", date(day))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_times_are_rfc_3339() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(19_723), "2024-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(date(11_016), "2000-02-29");
        assert_eq!(timestamp(0, 0, 3), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            timestamp(1_700_000_000, 123_456, 6),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(
            timestamp((-1_000i64).div_euclid(1_000), 0, 3),
            "1969-12-31T23:59:59.000Z"
        );
        assert_eq!(time_of_day(3_723_004_000, 3), "01:02:03.004");
    }
}
