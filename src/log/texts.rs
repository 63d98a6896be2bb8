//! Event texts in a few large buffers that never move.

/// Every event's JSON text, in a few large buffers (no allocation per
/// event). A buffer is never reallocated once texts live in it: appending
/// to a long session never copies what it already holds, so a live append
/// costs the same at event 10 and at event 1,000,000.
#[derive(Debug, Clone, Default)]
pub struct Texts {
    /// The buffers; only the last one takes more text.
    chunks: Vec<String>,
    /// Where each chunk starts in the offsets `spans` use.
    bases: Vec<usize>,
    /// Each text's start and end offset (its chunk's base plus its index there).
    spans: Vec<(usize, usize)>,
}

/// Bounds on the capacity of a new buffer: about what the texts before it
/// take (so buffers double as a session grows), at least the smaller bound
/// and at most the larger (a larger text gets a buffer of its own size).
/// Buffers of the larger size are mapped on their own by the allocator and
/// returned to the system when the session goes.
const TEXT_CHUNK_MIN: usize = 64 << 10;
const TEXT_CHUNK_MAX: usize = 32 << 20;

impl Texts {
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<&str> {
        let &(s, e) = self.spans.get(i)?;
        // The last chunk whose base is at or before `s`.
        let k = self.bases.partition_point(|&b| b <= s).checked_sub(1)?;
        let base = self.bases[k];
        self.chunks[k].get(s - base..e - base)
    }
    /// The end offset of the texts so far (where the next text starts).
    fn end(&self) -> usize {
        match (self.bases.last(), self.chunks.last()) {
            (Some(b), Some(c)) => b + c.len(),
            _ => 0,
        }
    }
    /// A chunk with room for `bytes` more, started when the last one is full.
    fn room(&mut self, bytes: usize) -> &mut String {
        let full = self
            .chunks
            .last()
            .is_none_or(|c| c.capacity() - c.len() < bytes);
        if full {
            let base = self.end();
            self.bases.push(base);
            let size = base.clamp(TEXT_CHUNK_MIN, TEXT_CHUNK_MAX);
            self.chunks.push(String::with_capacity(bytes.max(size)));
        }
        let last = self.chunks.len() - 1;
        &mut self.chunks[last]
    }
    pub fn push(&mut self, text: &str) {
        let start = self.end();
        self.room(text.len()).push_str(text);
        self.spans.push((start, start + text.len()));
    }
    /// Room for `count` more events (their texts take chunks as they come).
    pub(super) fn reserve(&mut self, count: usize) {
        self.spans.reserve(count);
    }
    /// Take log texts as the first buffers, one after another (a span's
    /// offset is its buffer's start, the lengths before it summed, plus its
    /// offset there); before any push.
    pub(super) fn adopt_buffers(&mut self, texts: Vec<String>) {
        self.chunks = Vec::with_capacity(texts.len());
        self.bases = Vec::with_capacity(texts.len());
        let mut base = 0;
        for text in texts {
            // An empty buffer holds no text: skipping it moves no offset.
            if text.is_empty() {
                continue;
            }
            self.bases.push(base);
            base += text.len();
            self.chunks.push(text);
        }
    }
    pub(super) fn push_span(&mut self, start: usize, end: usize) {
        self.spans.push((start, end));
    }
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
    /// The offsets texts `from..to` cover (at least their total length).
    pub(super) fn span_bytes(&self, from: usize, to: usize) -> usize {
        match (
            self.spans.get(from),
            to.checked_sub(1).and_then(|l| self.spans.get(l)),
        ) {
            (Some(&(start, _)), Some(&(_, end))) if to > from => end.saturating_sub(start),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_span_chunks_without_moving_what_they_hold() {
        let mut t = Texts::default();
        t.push_span(5, 7);
        t.adopt_buffers(vec!["head\nab".to_string()]);
        let big = "x".repeat(TEXT_CHUNK_MIN + 3);
        let first_chunk = t.chunks[0].as_ptr();
        t.push("cd");
        let second = t.chunks[1].as_ptr();
        t.push(&big);
        t.push("");
        t.push("ef");
        assert_eq!(t.chunks[0].as_ptr(), first_chunk);
        assert_eq!(t.chunks[1].as_ptr(), second);
        assert_eq!(t.chunks.len(), 4);
        let all: Vec<&str> = t.iter().collect();
        assert_eq!(all, vec!["ab", "cd", big.as_str(), "", "ef"]);
        assert_eq!(t.get(5), None);
        assert_eq!(t.len(), 5);
        // Offsets only grow: what spans cover bounds the texts' length.
        for from in 0..5 {
            for to in from..=5 {
                let sum: usize = (from..to).map(|i| t.get(i).unwrap().len()).sum();
                assert!(t.span_bytes(from, to) >= sum, "{from}..{to}");
            }
        }
    }

    #[test]
    fn texts_adopt_several_buffers_and_grow_after_them() {
        let mut t = Texts::default();
        // "ab" and "c" in the first buffer, "de" in the third (the empty
        // second buffer moves no offset).
        for (s, e) in [(0, 2), (3, 4), (5, 7)] {
            t.push_span(s, e);
        }
        t.adopt_buffers(vec!["ab\nc\n".into(), String::new(), "de".into()]);
        t.push("fg");
        let all: Vec<&str> = t.iter().collect();
        assert_eq!(all, vec!["ab", "c", "de", "fg"]);
        assert_eq!(t.chunks.len(), 3, "the empty buffer is not kept");
        assert_eq!(t.get(4), None);
    }
}
