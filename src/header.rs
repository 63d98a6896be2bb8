//! Request headers (SPEC 7): the canonical form, equality, and the fold over
//! `request/header` events.

use crate::json::canonical_eq;
use serde_json::{Map, Value};

fn is_empty_field(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `canonicalHeader(h)`: drop an empty `system`, `tools` or `messagePrefix`.
pub fn canonical_header(header: &Value) -> Value {
    let Some(obj) = header.as_object() else {
        return header.clone();
    };
    let kept: Map<String, Value> = obj
        .iter()
        .filter(|(k, v)| {
            !(matches!(k.as_str(), "system" | "tools" | "messagePrefix") && is_empty_field(v))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept)
}

fn config_equals(a: Option<&Value>, b: Option<&Value>) -> bool {
    let empty = Map::new();
    let a = a.and_then(Value::as_object).unwrap_or(&empty);
    let b = b.and_then(Value::as_object).unwrap_or(&empty);
    let same = |k: &str| match (a.get(k), b.get(k)) {
        (None, None) => true,
        (Some(Value::Array(x)), Some(Value::Array(y))) if k == "stop" => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| canonical_eq(p, q))
        }
        (Some(x), Some(y)) => canonical_eq(x, y),
        _ => false,
    };
    a.keys().chain(b.keys()).all(|k| same(k))
}

/// A field that counts as absent when missing or empty.
fn optional_field<'a>(h: &'a Value, k: &str) -> Option<&'a Value> {
    h.get(k).filter(|v| !is_empty_field(v))
}

/// `headerEquals(a, b)`.
pub fn header_equals(a: &Value, b: &Value) -> bool {
    if !config_equals(a.get("config"), b.get("config")) {
        return false;
    }
    ["system", "messagePrefix", "tools"].iter().all(|k| {
        match (optional_field(a, k), optional_field(b, k)) {
            (None, None) => true,
            (Some(x), Some(y)) => canonical_eq(x, y),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_drops_empty_fields_only() {
        assert_eq!(
            canonical_header(
                &json!({"config":{"provider":"p","model":"m"},"system":"","tools":[],"messagePrefix":[]})
            ),
            json!({"config":{"provider":"p","model":"m"}})
        );
        let full =
            json!({"config":{"provider":"p","model":"m"},"system":"s","tools":[{"name":"t"}]});
        assert_eq!(canonical_header(&full), full);
    }

    #[test]
    fn equality_is_field_wise() {
        let a = json!({"config":{"provider":"p","model":"m","stop":["a","b"]},"system":"s"});
        let b =
            json!({"config":{"model":"m","provider":"p","stop":["a","b"]},"system":"s","tools":[]});
        assert!(header_equals(&a, &b));
        let c = json!({"config":{"provider":"p","model":"m","stop":["b","a"]},"system":"s"});
        assert!(!header_equals(&a, &c));
        let d = json!({"config":{"provider":"p","model":"m","stop":["a","b"],"temperature":0.5},"system":"s"});
        assert!(!header_equals(&a, &d));
        let e = json!({"config":{"provider":"p","model":"m","stop":["a","b"]},"system":"s","messagePrefix":[{"role":"user"}]});
        assert!(!header_equals(&a, &e));
    }

    #[test]
    fn tools_compare_in_order() {
        let t1 = json!({"name":"a","parameters":{"x":1,"y":2}});
        let t1b = json!({"parameters":{"y":2,"x":1},"name":"a"});
        let t2 = json!({"name":"b"});
        let cfg = json!({"provider":"p","model":"m"});
        assert!(header_equals(
            &json!({"config": cfg, "tools":[t1, t2]}),
            &json!({"config": cfg, "tools":[t1b, t2]})
        ));
        assert!(!header_equals(
            &json!({"config": cfg, "tools":[t1, t2]}),
            &json!({"config": cfg, "tools":[t2, t1]})
        ));
    }
}
