//! The store's tables: the SQL that makes them, and the check that a
//! schema's tables of those names are the store's (a schema holding
//! someone else's `sessions` is refused before anything is created in it).

use super::SCHEMA_VERSION;

/// A column of `information_schema`-like shape: name and type.
type Column = (&'static str, &'static str);

/// The columns of the store's tables, as `format_type` names their types.
pub const TABLES: [(&str, &[Column]); 4] = [
    ("dsh_meta", &[("key", "text"), ("value", "text")]),
    (
        "sessions",
        &[
            ("id", "text"),
            ("version", "bigint"),
            ("created_at", "bigint"),
            ("cwd", "text"),
            ("parent_session", "text"),
            ("seed_length", "bigint"),
        ],
    ),
    (
        "events",
        &[
            ("session_id", "text"),
            ("seq", "bigint"),
            ("type", "text"),
            ("time", "bigint"),
            ("data", "text"),
            ("source_event_seqs", "text"),
            ("surface_op", "text"),
        ],
    ),
    (
        "leases",
        &[
            ("session_id", "text"),
            ("holder", "text"),
            ("host", "text"),
            ("pid", "bigint"),
            ("epoch", "bigint"),
            ("expires_at", "timestamp with time zone"),
        ],
    ),
];

/// One of the store's tables as the catalog shows it.
struct Table {
    name: String,
    /// `pg_class.relkind`: `r` (or `p`, partitioned) for a table.
    kind: char,
    /// Name and `format_type` of each column.
    columns: Vec<(String, String)>,
}

/// The store's tables found in a schema.
#[derive(Default)]
pub struct Found {
    tables: Vec<Table>,
}

impl Found {
    /// One catalog row: a column of `table` (rows come ordered by table).
    pub fn add(&mut self, table: String, kind: char, column: Option<(String, String)>) {
        if self.tables.last().is_none_or(|t| t.name != table) {
            self.tables.push(Table {
                name: table,
                kind,
                columns: Vec::new(),
            });
        }
        if let (Some(c), Some(last)) = (column, self.tables.last_mut()) {
            last.columns.push(c);
        }
    }

    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn has(&self, table: &str) -> bool {
        self.get(table).is_some()
    }

    fn get(&self, table: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.name == table)
    }

    /// The first of the store's tables present with another shape: its
    /// name and what it holds.
    pub fn foreign(&self, only: Option<&str>) -> Option<(String, String)> {
        for (table, expected) in TABLES {
            if only.is_some_and(|o| o != table) {
                continue;
            }
            let Some(Table {
                kind,
                columns: cols,
                ..
            }) = self.get(table)
            else {
                continue;
            };
            let mut have: Vec<(&str, &str)> =
                cols.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
            let mut want: Vec<(&str, &str)> = expected.to_vec();
            have.sort_unstable();
            want.sort_unstable();
            if *kind != 'r' && *kind != 'p' || have != want {
                let shown = if *kind != 'r' && *kind != 'p' {
                    "not a table".to_string()
                } else {
                    cols.iter()
                        .map(|(n, t)| format!("{n} {t}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Some((table.to_string(), shown));
            }
        }
        None
    }
}

/// The tables of schema version `SCHEMA_VERSION` in schema `s` (quoted).
pub fn schema_tables_sql(s: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {s}.dsh_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS {s}.sessions (id TEXT PRIMARY KEY, version BIGINT NOT NULL, \
           created_at BIGINT NOT NULL, cwd TEXT, parent_session TEXT, seed_length BIGINT);
         CREATE TABLE IF NOT EXISTS {s}.events (session_id TEXT NOT NULL REFERENCES {s}.sessions(id) ON DELETE CASCADE, \
           seq BIGINT NOT NULL, type TEXT NOT NULL, time BIGINT NOT NULL, data TEXT NOT NULL, \
           source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq));
         CREATE TABLE IF NOT EXISTS {s}.leases (session_id TEXT PRIMARY KEY, holder TEXT NOT NULL, \
           host TEXT NOT NULL, pid BIGINT NOT NULL, epoch BIGINT NOT NULL, expires_at TIMESTAMPTZ NOT NULL);"
    )
}

/// The tables and the version stamp.
pub fn schema_sql(s: &str) -> String {
    format!(
        "{}\n         INSERT INTO {s}.dsh_meta (key, value) VALUES ('schema_version', '{SCHEMA_VERSION}');",
        schema_tables_sql(s)
    )
}
