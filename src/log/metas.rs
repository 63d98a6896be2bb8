//! What the log keeps per event besides its text, in columns: 10 bytes an
//! event (time, kind, surface-op tag) instead of a 40-byte struct, with the
//! rare replace ranges in a table of their own.

use super::EventMeta;
use crate::event::Kind;
use crate::surface::SurfaceOp;

/// Which surface op an event carries (the range of a replace is in `replaces`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpTag {
    None,
    Append,
    Replace,
}

#[derive(Debug, Clone, Default)]
pub struct Metas {
    times: Vec<i64>,
    kinds: Vec<Kind>,
    ops: Vec<OpTag>,
    /// `(seq, start, end)` of every replace, in seq order.
    replaces: Vec<(u64, u64, u64)>,
}

impl Metas {
    pub fn len(&self) -> usize {
        self.times.len()
    }
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }
    pub fn push(&mut self, meta: EventMeta) {
        let seq = self.len() as u64;
        self.times.push(meta.time);
        self.kinds.push(meta.kind);
        self.ops.push(match meta.op {
            None => OpTag::None,
            Some(SurfaceOp::Append) => OpTag::Append,
            Some(SurfaceOp::Replace { start, end }) => {
                self.replaces.push((seq, start, end));
                OpTag::Replace
            }
        });
    }
    /// Room for `count` more events.
    pub fn reserve(&mut self, count: usize) {
        self.times.reserve(count);
        self.kinds.reserve(count);
        self.ops.reserve(count);
    }
    pub fn get(&self, seq: usize) -> Option<EventMeta> {
        let op = match *self.ops.get(seq)? {
            OpTag::None => None,
            OpTag::Append => Some(SurfaceOp::Append),
            OpTag::Replace => {
                let k = self
                    .replaces
                    .binary_search_by_key(&(seq as u64), |r| r.0)
                    .ok()?;
                let (_, start, end) = self.replaces[k];
                Some(SurfaceOp::Replace { start, end })
            }
        };
        Some(EventMeta {
            kind: *self.kinds.get(seq)?,
            time: *self.times.get(seq)?,
            op,
        })
    }
    pub fn kind(&self, seq: usize) -> Option<Kind> {
        self.kinds.get(seq).copied()
    }
    /// The first `end` events' facts (a fork's copy).
    pub fn prefix(&self, end: usize) -> Metas {
        let end = end.min(self.len());
        let replaces = self.replaces.partition_point(|r| r.0 < end as u64);
        Metas {
            times: self.times[..end].to_vec(),
            kinds: self.kinds[..end].to_vec(),
            ops: self.ops[..end].to_vec(),
            replaces: self.replaces[..replaces].to_vec(),
        }
    }
    /// Which of the first `end` events move the surface or the header fold,
    /// in order (the others a replay passes over).
    pub fn effects(&self, end: usize) -> impl Iterator<Item = usize> + '_ {
        let end = end.min(self.len());
        (0..end).filter(|&i| self.ops[i] != OpTag::None || self.kinds[i] == Kind::RequestHeader)
    }
    /// The last event that is a `turn/start` or `turn/end`.
    pub fn last_boundary(&self) -> Option<usize> {
        (self.kinds.iter()).rposition(|k| matches!(k, Kind::TurnStart | Kind::TurnEnd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metas_give_back_what_was_pushed() {
        let mut m = Metas::default();
        let all = [
            EventMeta {
                kind: Kind::TurnStart,
                time: 1,
                op: None,
            },
            EventMeta {
                kind: Kind::UserMessage,
                time: 2,
                op: Some(SurfaceOp::Append),
            },
            EventMeta {
                kind: Kind::UserMessage,
                time: i64::MAX,
                op: Some(SurfaceOp::Replace { start: 1, end: 1 }),
            },
            EventMeta {
                kind: Kind::Other,
                time: 0,
                op: None,
            },
            EventMeta {
                kind: Kind::ContextMessage,
                time: 5,
                op: Some(SurfaceOp::Replace { start: 0, end: 3 }),
            },
        ];
        for e in all {
            m.push(e);
        }
        assert_eq!(m.len(), all.len());
        for (i, e) in all.iter().enumerate() {
            let got = m.get(i).map(|g| (g.kind, g.time, g.op));
            assert_eq!(got, Some((e.kind, e.time, e.op)), "meta {i}");
        }
        assert!(m.get(all.len()).is_none());
        assert_eq!(m.kind(4), Some(Kind::ContextMessage));
    }
}
