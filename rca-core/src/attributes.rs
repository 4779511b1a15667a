//! [`Attributes`]: the few further fields of a record (a log line's trace and span ids, a
//! span's status code), kept as a small sorted array rather than a tree.
//!
//! A record carries a handful of attributes, and a source holds millions of records: a tree
//! map allocates a node of eleven slots for two entries (about 540 bytes on 64-bit targets);
//! an array sized to its entries holds two in 80. Keys are [`Name`]s, so a source that
//! interns them holds each key once. Reads and writes look like a map's (`get`, `insert`,
//! `iter` in key order), and it (de)serializes as a JSON object.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::name::Name;

/// A record's further fields: unique keys in sorted order, each with its text.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Attributes(Vec<(Name, String)>);

impl Attributes {
    /// No attributes (allocates nothing).
    pub fn new() -> Self {
        Attributes(Vec::new())
    }

    /// How many attributes there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&String> {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    /// The value of `key`, to change in place.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut String> {
        match self.position(key) {
            Ok(i) => Some(&mut self.0[i].1),
            Err(_) => None,
        }
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key` to `value`, returning the value it replaced. The array grows by exactly one
    /// entry, so it never holds spare slots.
    pub fn insert(&mut self, key: impl Into<Name>, value: impl Into<String>) -> Option<String> {
        let key = key.into();
        let value = value.into();
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.reserve_exact(1);
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.position(key).ok()?;
        let (_, value) = self.0.remove(i);
        self.0.shrink_to_fit();
        Some(value)
    }

    /// Keeps the attributes for which `keep(key, value)` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(&Name, &mut String) -> bool) {
        self.0.retain_mut(|(k, v)| keep(k, v));
        self.0.shrink_to_fit();
    }

    /// The attributes in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&Name, &String)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &Name> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    pub fn values(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(_, v)| v)
    }

    /// Replaces each key by the interner's shared name for it (what a source does while it
    /// reads, so a million records hold each key once).
    pub fn intern_keys(&mut self, interner: &mut crate::name::NameInterner) {
        for (k, _) in &mut self.0 {
            *k = interner.share(k);
        }
    }
}

impl<K: Into<Name>, V: Into<String>> FromIterator<(K, V)> for Attributes {
    /// Later entries win over earlier ones with the same key, as inserting them in turn.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(Name, String)> = iter
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        // A stable sort keeps equal keys in arrival order; keep the last of each run.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(Name, String)> = Vec::with_capacity(entries.len());
        for entry in entries {
            match out.last_mut() {
                Some(last) if last.0 == entry.0 => *last = entry,
                _ => out.push(entry),
            }
        }
        out.shrink_to_fit();
        Attributes(out)
    }
}

impl<K: Into<Name>, V: Into<String>> Extend<(K, V)> for Attributes {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

impl<K: Into<Name>, V: Into<String>, const N: usize> From<[(K, V); N]> for Attributes {
    fn from(entries: [(K, V); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl<'a> IntoIterator for &'a Attributes {
    type Item = (&'a Name, &'a String);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (Name, String)>,
        fn(&'a (Name, String)) -> (&'a Name, &'a String),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl IntoIterator for Attributes {
    type Item = (Name, String);
    type IntoIter = std::vec::IntoIter<(Name, String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl fmt::Debug for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for Attributes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k.as_str(), v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Attributes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct AttributesVisitor;

        impl<'de> Visitor<'de> for AttributesVisitor {
            type Value = Attributes;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of string values")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Attributes, A::Error> {
                let mut entries: Vec<(String, String)> = Vec::new();
                while let Some((k, v)) = access.next_entry::<String, String>()? {
                    entries.push((k, v));
                }
                Ok(entries.into_iter().collect())
            }
        }

        deserializer.deserialize_map(AttributesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_like_a_map_in_key_order() {
        let mut a = Attributes::new();
        assert!(a.is_empty());
        assert_eq!(a.insert("trace_id", "t1"), None);
        assert_eq!(a.insert("span_id", "s1"), None);
        assert_eq!(a.insert("trace_id", "t2"), Some("t1".to_string()));
        assert_eq!(a.len(), 2);
        assert_eq!(a.get("trace_id").map(String::as_str), Some("t2"));
        assert!(a.contains_key("span_id") && !a.contains_key("thread"));
        let keys: Vec<&str> = a.keys().map(|k| k.as_str()).collect();
        assert_eq!(keys, ["span_id", "trace_id"]);
        a.get_mut("span_id").unwrap().push_str("-r1");
        assert_eq!(a.get("span_id").unwrap(), "s1-r1");
        assert_eq!(a.remove("span_id"), Some("s1-r1".to_string()));
        assert_eq!(a.remove("span_id"), None);
        assert_eq!(a.len(), 1);
    }

    #[test]
    fn collecting_keeps_the_last_value_of_a_repeated_key_as_a_map_does() {
        let a: Attributes = [("b", "1"), ("a", "2"), ("b", "3")].into();
        let pairs: Vec<(String, String)> =
            a.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        assert_eq!(pairs, [("a".into(), "2".into()), ("b".into(), "3".into())]);
    }

    #[test]
    fn serializes_as_an_object_and_reads_one_back() {
        let a: Attributes = [("trace_id", "t"), ("code.lineno", "42")].into();
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(json, r#"{"code.lineno":"42","trace_id":"t"}"#);
        let back: Attributes = serde_json::from_str(&json).unwrap();
        assert_eq!(back, a);
        let dup: Attributes = serde_json::from_str(r#"{"k":"1","k":"2"}"#).unwrap();
        assert_eq!(dup.get("k").unwrap(), "2");
        assert!(serde_json::from_str::<Attributes>(r#"{"k":1}"#).is_err());
        assert!(serde_json::from_str::<Attributes>("[]").is_err());
    }

    #[test]
    fn two_attributes_hold_no_spare_slots() {
        let mut a = Attributes::new();
        a.insert("trace_id", "t");
        a.insert("span_id", "s");
        assert_eq!(a.0.capacity(), 2);
        let b: Attributes = [("x", "1"), ("y", "2")].into();
        assert_eq!(b.0.capacity(), 2);
    }
}
