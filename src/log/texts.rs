//! Event texts in blocks that never move; full blocks are kept compressed.

use crate::error::{Code, CoreError, CoreResult};
use crate::executor::{self, Task};
use std::ops::Deref;
use std::sync::{Arc, Mutex, PoisonError};

fn missing_text(i: usize) -> CoreError {
    CoreError::new(Code::Internal, format!("the text of event {i} is missing"))
}

/// One block of texts, one after another.
#[derive(Debug, Clone)]
pub(super) enum Block {
    /// Texts as they are: the open block (the last one, which takes
    /// pushes), or a full one waiting for the compressor.
    Raw(String),
    /// Texts handed to the compressor (or waiting for it: a buffer adopted
    /// from a JSONL read starts so, its texts slices of the log's lines).
    Shared(Arc<String>),
    /// Texts that would not compress (by at least an eighth).
    Kept(String),
    /// Texts compressed with LZ4 (`len`: their length as text). Agent-log
    /// JSON compresses about 4:1, so a long session holds about a quarter
    /// of its log's size; reading a text opens its block once.
    Lz4 { len: usize, bytes: Box<[u8]> },
}

impl Block {
    /// Its length as text.
    fn len(&self) -> usize {
        match self {
            Block::Raw(text) | Block::Kept(text) => text.len(),
            Block::Shared(text) => text.len(),
            Block::Lz4 { len, .. } => *len,
        }
    }
}

/// What the compressor gives back: for each block it took (by index), the
/// pieces (base, block) that replace it.
type Compressed = Vec<(usize, Vec<(usize, Block)>)>;

/// Every event's JSON text, in blocks of about `BLOCK` bytes (no allocation
/// per event). A block is never reallocated once texts live in it, so an
/// append costs the same at event 10 and at event 1,000,000. Full blocks
/// are compressed on a helper thread (`compress`), or as they fill up when
/// `compress_on_seal` is set (a seed, already on a helper thread).
#[derive(Debug, Default)]
pub struct Texts {
    /// Each block, after where it starts in the offsets `spans` use.
    blocks: Vec<(usize, Block)>,
    /// Each text's start and end offset (its block's base plus its index there).
    spans: Vec<(usize, usize)>,
    /// Compress each block as it fills up, here (see the struct).
    pub(super) compress_on_seal: bool,
    /// The compression handed to the executor, until a call takes its
    /// result (see `compress`).
    compressing: Option<Task<Compressed>>,
    /// Nothing waits for the compressor (a cheap look before `compress`).
    pub(super) idle: bool,
    /// The block opened last, shared with the texts handed out from it: a
    /// run of reads in one block decompresses it once.
    recent: Mutex<Option<(usize, Arc<String>)>>,
}

impl Clone for Texts {
    /// The texts; not the compression under way, nor the opened block.
    fn clone(&self) -> Texts {
        Texts {
            blocks: self.blocks.clone(),
            spans: self.spans.clone(),
            compress_on_seal: self.compress_on_seal,
            ..Texts::default()
        }
    }
}

/// A text of the log: borrowed from a raw block, or a slice of an opened
/// (decompressed) block it shares. Derefs to `str`.
#[derive(Debug, Clone)]
pub enum Text<'a> {
    Borrowed(&'a str),
    Opened(Arc<String>, usize, usize),
}

impl Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        match self {
            Text::Borrowed(s) => s,
            Text::Opened(block, s, e) => block.get(*s..*e).unwrap_or(""),
        }
    }
}

impl<'a> Text<'a> {
    /// Bytes `start..end` of this text (empty if that is not a part of it).
    pub fn narrow_to(self, start: usize, end: usize) -> Text<'a> {
        match self {
            Text::Borrowed(s) => Text::Borrowed(s.get(start..end).unwrap_or("")),
            Text::Opened(block, s, e) if start <= end && s + end <= e => {
                Text::Opened(block, s + start, s + end)
            }
            Text::Opened(block, s, _) => Text::Opened(block, s, s),
        }
    }
}

/// Bounds on a new block's capacity: about what the texts before it take
/// (so a short session stays small), at least `BLOCK_MIN` and at most
/// `BLOCK` (a larger text gets a block of its own size). `BLOCK` is what a
/// read of one text decompresses.
const BLOCK_MIN: usize = 16 << 10;
const BLOCK: usize = 256 << 10;

/// Texts waiting for the compressor are left as they are until they take at
/// least this much (a short session is not worth a thread), and a read
/// copies the caller's bytes rather than compress them below it.
pub const COMPRESS_MIN_BYTES: usize = 1 << 20;

impl Texts {
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    /// The block holding offset `s`, and its base.
    fn block_of(&self, s: usize) -> Option<(usize, usize)> {
        let k = self
            .blocks
            .partition_point(|&(b, _)| b <= s)
            .checked_sub(1)?;
        Some((k, self.blocks[k].0))
    }
    /// Block `k` as text (opened if compressed). A block that does not
    /// decompress is a bug (its bytes never leave this struct): `INTERNAL`.
    fn open(&self, k: usize) -> CoreResult<Text<'_>> {
        let (len, bytes) = match self.blocks.get(k).map(|(_, block)| block) {
            None => {
                let missing = format!("block {k} of event texts is missing");
                return Err(CoreError::new(Code::Internal, missing));
            }
            Some(Block::Raw(text)) | Some(Block::Kept(text)) => return Ok(Text::Borrowed(text)),
            Some(Block::Shared(text)) => return Ok(Text::Borrowed(text)),
            Some(Block::Lz4 { len, bytes }) => (*len, bytes),
        };
        let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        let block = match recent.as_ref() {
            Some((j, block)) if *j == k => block.clone(),
            _ => {
                let broken = |what: String| {
                    CoreError::new(Code::Internal, format!("a block of event texts {what}"))
                };
                let raw = lz4_flex::block::decompress(bytes, len)
                    .map_err(|e| broken(format!("does not decompress: {e}")))?;
                let text = String::from_utf8(raw)
                    .map_err(|_| broken("decompresses to invalid UTF-8".into()))?;
                let block = Arc::new(text);
                *recent = Some((k, block.clone()));
                block
            }
        };
        Ok(Text::Opened(block, 0, len))
    }
    /// The text of event `i`.
    pub fn get(&self, i: usize) -> CoreResult<Text<'_>> {
        let &(s, e) = self.spans.get(i).ok_or_else(|| missing_text(i))?;
        let (k, base) = self.block_of(s).ok_or_else(|| missing_text(i))?;
        let (s, e) = (s - base, e - base);
        let text = self.open(k)?;
        if text.get(s..e).is_none() {
            return Err(missing_text(i));
        }
        Ok(text.narrow_to(s, e))
    }
    /// Call `f` with each of texts `from..to` in order, opening each block
    /// once; the first text that cannot be read stops it (`INTERNAL`).
    pub fn visit(&self, from: usize, to: usize, mut f: impl FnMut(usize, &str)) -> CoreResult<()> {
        let to = to.min(self.len());
        let mut open: Option<(usize, usize, Text<'_>)> = None;
        for i in from..to {
            let (s, e) = self.spans[i];
            let (k, base) = self.block_of(s).ok_or_else(|| missing_text(i))?;
            if open.as_ref().is_none_or(|(j, ..)| *j != k) {
                open = Some((k, base, self.open(k)?));
            }
            let text = open
                .as_ref()
                .and_then(|(_, base, t)| t.get(s - base..e - base))
                .ok_or_else(|| missing_text(i))?;
            f(i, text);
        }
        Ok(())
    }
    /// Texts `0..end`, as a fork takes them: the blocks before the one that
    /// holds text `end` copied as they are (compressed ones stay so), and
    /// the texts of that block before `end` pushed into an open block (a
    /// text never straddles blocks). All of them: a copy.
    pub fn prefix(&self, end: usize) -> CoreResult<Texts> {
        let Some(&(cut, _)) = self.spans.get(end) else {
            return Ok(self.clone());
        };
        let (k, base) = self.block_of(cut).ok_or_else(|| missing_text(end))?;
        let first = self.spans.partition_point(|&(s, _)| s < base);
        let mut texts = Texts {
            blocks: self.blocks[..k].to_vec(),
            spans: self.spans[..first].to_vec(),
            compress_on_seal: self.compress_on_seal,
            ..Texts::default()
        };
        texts.spans.reserve(end.saturating_sub(first));
        self.visit(first, end, |_, text| texts.push(text))?;
        Ok(texts)
    }
    /// The end offset of the texts so far (where the next text starts).
    fn end(&self) -> usize {
        self.blocks.last().map_or(0, |(b, block)| b + block.len())
    }
    /// The open block, with room for `bytes` more: a new one when the last
    /// is full or sealed (the full one is sealed then).
    fn room(&mut self, bytes: usize) -> &mut String {
        let full = match self.blocks.last() {
            Some((_, Block::Raw(c))) => c.capacity() - c.len() < bytes,
            _ => true,
        };
        if full {
            // Compress the full block here and now (see `compress_on_seal`).
            if let (true, Some((_, block))) = (self.compress_on_seal, self.blocks.last_mut()) {
                if let Block::Raw(text) = block {
                    *block = compressed(text);
                }
            }
            let base = self.end();
            let size = base.clamp(BLOCK_MIN, BLOCK);
            let block = Block::Raw(String::with_capacity(bytes.max(size)));
            self.blocks.push((base, block));
        }
        match self.blocks.last_mut() {
            Some((_, Block::Raw(c))) => c,
            // Just pushed or checked raw above.
            _ => unreachable!("the open block is raw"),
        }
    }
    pub fn push(&mut self, text: &str) {
        self.idle = false;
        let start = self.end();
        self.room(text.len()).push_str(text);
        self.spans.push((start, start + text.len()));
    }
    /// Room for `count` more events (their texts take blocks as they come).
    pub(super) fn reserve(&mut self, count: usize) {
        self.spans.reserve(count);
    }
    /// Take a read's texts as the first blocks, one after another (a
    /// span's offset is its text's start, the lengths before it summed,
    /// plus its offset there); before any push. Buffers the log owns wait
    /// for the compressor as they are (see `compress`); the caller's bytes
    /// come compressed already (`Taken::compressed`).
    pub(super) fn adopt(&mut self, texts: Vec<Taken>) {
        self.idle = false;
        self.blocks = Vec::with_capacity(texts.len());
        let mut base = 0;
        for taken in texts {
            let len = taken.len();
            match taken {
                // An empty one holds no text: skipping it moves no offset.
                _ if len == 0 => {}
                Taken::Buffer(text) => self.blocks.push((base, Block::Shared(Arc::new(text)))),
                Taken::Compressed { pieces, .. } => self.blocks.extend(pieces),
            }
            base += len;
        }
    }

    /// Compress the blocks that wait for it (full raw blocks, and buffers
    /// adopted from a read, cut into pieces of about `BLOCK` bytes where a
    /// text starts), once they hold `min_bytes` or more, as a task handed
    /// to the executor. Returns whether nothing is left to do: a call hands
    /// the task over, a later one takes its result in place of what it
    /// took (and hands another if more has filled up meanwhile). Reads and
    /// pushes go on meanwhile; this never waits. With no pool thread free,
    /// the blocks wait for a later call.
    pub fn compress(&mut self, min_bytes: usize) -> bool {
        if let Some(task) = self.compressing.take() {
            match task.try_take("the compressor") {
                None => {
                    self.compressing = Some(task);
                    return false;
                }
                Some(Ok(done)) => self.take_compressed(done),
                // A panicking compressor would be a bug: the blocks it
                // took stay shared (readable), and a later call takes them
                // again.
                Some(Err(_)) => {}
            }
        }
        // Shared blocks wait, and full raw ones (the last is open).
        let open = self.blocks.len().saturating_sub(1);
        let waiting: Vec<usize> = (0..self.blocks.len())
            .filter(|&k| match self.blocks[k].1 {
                Block::Shared(_) => true,
                Block::Raw(_) => k < open,
                _ => false,
            })
            .collect();
        let bytes: usize = waiting.iter().map(|&k| self.blocks[k].1.len()).sum();
        if waiting.is_empty() || bytes < min_bytes {
            // Only a push (which a built log never takes) makes more wait.
            self.idle = true;
            return true;
        }
        let mut work = Vec::with_capacity(waiting.len());
        for k in waiting {
            if let (_, Block::Raw(text)) = &mut self.blocks[k] {
                self.blocks[k].1 = Block::Shared(Arc::new(std::mem::take(text)));
            }
            if let (base, Block::Shared(text)) = &self.blocks[k] {
                work.push((k, *base, text.clone(), self.cuts(*base, text.len())));
            }
        }
        let compress = move || -> Compressed {
            work.into_iter()
                .map(|(k, base, text, cuts)| (k, pieces(base, &text, &cuts)))
                .collect()
        };
        // With no pool thread free, the blocks stay shared (readable) and
        // a later call hands them over again.
        self.compressing = executor::start(compress).ok();
        false
    }

    /// Put what the compressor gave back in place of the blocks it took.
    fn take_compressed(&mut self, done: Compressed) {
        let mut done = done.into_iter().peekable();
        for (k, block) in std::mem::take(&mut self.blocks).into_iter().enumerate() {
            match done.next_if(|(j, _)| *j == k) {
                // The block taken is freed here (not on the compressor's
                // thread), its pieces in its place.
                Some((_, pieces)) => self.blocks.extend(pieces),
                None => self.blocks.push(block),
            }
        }
        // Block indices moved: the opened block is another one now.
        *self.recent.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Where to cut the block at `base` (of `len` bytes): `cuts_at` the
    /// starts of the texts that lie in it whole.
    fn cuts(&self, base: usize, len: usize) -> Vec<usize> {
        let first = self.spans.partition_point(|&(s, _)| s < base);
        let starts = self.spans[first..]
            .iter()
            .take_while(|&&(s, _)| s < base + len)
            .filter(|&&(_, e)| e <= base + len)
            .map(|&(s, _)| s - base);
        cuts_at(starts, len)
    }
    pub(super) fn push_span(&mut self, start: usize, end: usize) {
        self.spans.push((start, end));
    }
    /// The offsets texts `from..to` cover (at least their total length).
    pub(crate) fn span_bytes(&self, from: usize, to: usize) -> usize {
        let spans = self.spans.get(from..to).unwrap_or_default();
        match (spans.first(), spans.last()) {
            (Some(&(start, _)), Some(&(_, end))) => end.saturating_sub(start),
            _ => 0,
        }
    }
}

/// A read's text as the log takes it (`Texts::adopt`): a buffer it owns,
/// or the caller's bytes, compressed in pieces as they are read so that no
/// raw copy of them is ever whole.
pub(super) enum Taken {
    Buffer(String),
    /// The pieces (base, block), and their length as text.
    Compressed {
        len: usize,
        pieces: Vec<(usize, Block)>,
    },
}

impl Taken {
    /// Its length as text.
    pub(super) fn len(&self) -> usize {
        match self {
            Taken::Buffer(text) => text.len(),
            Taken::Compressed { len, .. } => *len,
        }
    }
    /// The caller's `text` (at offset `base` of the log's texts) in pieces
    /// of about `BLOCK` bytes, cut only where one of its `lines` (spans in
    /// it) starts, so no event's text straddles a cut.
    pub(super) fn compressed(base: usize, text: &str, lines: &[(usize, usize)]) -> Taken {
        let cuts = cuts_at(lines.iter().map(|&(s, _)| s), text.len());
        Taken::Compressed {
            len: text.len(),
            pieces: pieces(base, text, &cuts),
        }
    }
}

/// Where to cut `len` bytes into pieces of about `BLOCK` bytes: 0, some of
/// `starts` (ascending offsets where a text starts), and `len`.
fn cuts_at(starts: impl Iterator<Item = usize>, len: usize) -> Vec<usize> {
    let mut cuts = vec![0];
    for s in starts.take_while(|&s| s < len) {
        let last = cuts.last().copied().unwrap_or(0);
        if s > last && s - last >= BLOCK {
            cuts.push(s);
        }
    }
    cuts.push(len);
    cuts
}

/// `text` (a block at `base`) cut at `cuts`, each piece LZ4-compressed when
/// that saves at least an eighth of it: (base, block) per piece.
fn pieces(base: usize, text: &str, cuts: &[usize]) -> Vec<(usize, Block)> {
    cuts.windows(2)
        .map(|w| (base + w[0], compressed(text.get(w[0]..w[1]).unwrap_or(""))))
        .collect()
}

/// `text` LZ4-compressed when that saves at least an eighth of it, else
/// kept as it is.
fn compressed(text: &str) -> Block {
    let bytes = lz4_flex::block::compress(text.as_bytes());
    if bytes.len() <= text.len() - text.len() / 8 {
        Block::Lz4 {
            len: text.len(),
            bytes: bytes.into_boxed_slice(),
        }
    } else {
        Block::Kept(text.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `adopt` of buffers the log owns.
    fn adopt_buffers(t: &mut Texts, texts: Vec<String>) {
        t.adopt(texts.into_iter().map(Taken::Buffer).collect());
    }

    fn all(t: &Texts) -> Vec<String> {
        (0..t.len())
            .filter_map(|i| t.get(i).ok())
            .map(|x| x.to_string())
            .collect()
    }

    fn visited(t: &Texts, from: usize, to: usize) -> Vec<Option<String>> {
        let mut out = Vec::new();
        t.visit(from, to, |_, s| out.push(Some(s.to_string())))
            .expect("every text reads");
        out
    }

    /// How many of `t`'s blocks are of the kind `is` says.
    fn blocks(t: &Texts, is: fn(&Block) -> bool) -> usize {
        t.blocks.iter().filter(|(_, b)| is(b)).count()
    }

    /// Every read path gives `want` back, before and after a push.
    fn reads_back(t: &mut Texts, mut want: Vec<String>) {
        assert_eq!(all(t), want);
        for i in (0..want.len()).rev().step_by(13) {
            assert_eq!(t.get(i).ok().as_deref(), Some(want[i].as_str()), "text {i}");
        }
        t.push("after");
        want.push("after".into());
        assert_eq!(
            visited(t, 0, want.len()),
            want.iter().cloned().map(Some).collect::<Vec<_>>()
        );
    }

    /// Run the compressor until nothing is left (it never waits itself).
    fn compress_all(t: &mut Texts, min_bytes: usize) {
        let mut spins = 0;
        while !t.compress(min_bytes) {
            std::thread::sleep(std::time::Duration::from_millis(2));
            spins += 1;
            assert!(spins < 5_000, "the compressor never finished");
        }
    }

    fn held_bytes(t: &Texts) -> usize {
        t.blocks
            .iter()
            .map(|(_, b)| match b {
                Block::Raw(c) | Block::Kept(c) => c.len(),
                Block::Shared(c) => c.len(),
                Block::Lz4 { bytes, .. } => bytes.len(),
            })
            .sum()
    }

    #[test]
    fn texts_span_blocks_without_moving_what_they_hold() {
        let mut t = Texts::default();
        t.push_span(5, 7);
        adopt_buffers(&mut t, vec!["head\nab".to_string()]);
        let big = "x".repeat(BLOCK + 3);
        t.push("cd");
        let second = match &t.blocks[1].1 {
            Block::Raw(c) => c.as_ptr(),
            _ => panic!("the open block is raw"),
        };
        t.push("ef");
        match &t.blocks[1].1 {
            Block::Raw(c) => assert_eq!(c.as_ptr(), second, "a push never moves the open block"),
            _ => panic!("the open block is raw"),
        }
        t.push(&big);
        t.push("");
        t.push("gh");
        assert_eq!(all(&t), vec!["ab", "cd", "ef", big.as_str(), "", "gh"]);
        assert!(t.get(6).is_err());
        assert_eq!(t.len(), 6);
        // Nothing is compressed until asked; then the full blocks are (the
        // big text is one repeated byte; "cdef" does not compress), and the
        // open one stays raw.
        assert!(matches!(t.blocks[0].1, Block::Shared(_)));
        assert!(matches!(t.blocks[2].1, Block::Raw(_)));
        compress_all(&mut t, 0);
        assert!(matches!(t.blocks[1].1, Block::Kept(_)));
        assert!(matches!(t.blocks[2].1, Block::Lz4 { .. }));
        assert!(matches!(t.blocks.last(), Some((_, Block::Raw(_)))));
        assert_eq!(all(&t), vec!["ab", "cd", "ef", big.as_str(), "", "gh"]);
        // Offsets only grow: what spans cover bounds the texts' length.
        for from in 0..6 {
            for to in from..=6 {
                let sum: usize = (from..to).map(|i| t.get(i).map_or(0, |x| x.len())).sum();
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
        adopt_buffers(&mut t, vec!["ab\nc\n".into(), String::new(), "de".into()]);
        t.push("fg");
        assert_eq!(all(&t), vec!["ab", "c", "de", "fg"]);
        assert_eq!(t.blocks.len(), 3, "the empty buffer is not kept");
        assert!(t.get(4).is_err());
    }

    #[test]
    fn adopted_buffers_are_compressed_on_a_helper_thread_and_read_back_exactly() {
        // Two adopted buffers of JSONL-like lines (a header line first, a
        // CRLF line, multi-byte text), pushes while the helper works.
        let mut want = Vec::new();
        let mut buffers = Vec::new();
        let mut spans = Vec::new();
        let mut base = 0;
        for part in 0..2 {
            let mut buf = String::from("{\"header\":true}\n");
            for i in 0..6_000 {
                let line = format!(
                    "{{\"seq\":{i},\"part\":{part},\"text\":\"é{}\"}}",
                    "ab".repeat(i % 300)
                );
                let start = base + buf.len();
                buf.push_str(&line);
                spans.push((start, start + line.len()));
                buf.push_str(if i % 11 == 0 { "\r\n" } else { "\n" });
                want.push(line);
            }
            base += buf.len();
            buffers.push(buf);
        }
        let mut t = Texts::default();
        for (s, e) in spans {
            t.push_span(s, e);
        }
        adopt_buffers(&mut t, buffers);
        assert!(!t.compress(1 << 20), "the first call starts the helper");
        t.push("pushed meanwhile");
        want.push("pushed meanwhile".into());
        assert_eq!(all(&t), want);
        compress_all(&mut t, 1 << 20);
        assert!(t.compress(1 << 20), "done stays done");
        assert_eq!(blocks(&t, |b| matches!(b, Block::Shared(_))), 0);
        let pieces = blocks(&t, |b| matches!(b, Block::Lz4 { .. }));
        assert!(pieces > 10, "{pieces} pieces");
        reads_back(&mut t, want);
        // A short adopted log stays as read (under the threshold).
        let mut small = Texts::default();
        small.push_span(0, 2);
        adopt_buffers(&mut small, vec!["ab".into()]);
        assert!(small.compress(1 << 20));
        assert!(matches!(small.blocks[0].1, Block::Shared(_)));
    }

    #[test]
    fn compressed_texts_are_taken_as_they_come_and_buffers_wait_for_the_compressor() {
        // JSONL-like texts: a header line, then lines (multi-byte, CRLF
        // endings, some longer than a block); `compressed` says which text
        // comes compressed (the caller's bytes) and which as a buffer.
        let build = |compressed: &[bool], lines: usize| {
            let (mut taken, mut spans, mut want) = (Vec::new(), Vec::new(), Vec::new());
            let mut base = 0;
            for (part, &compress) in compressed.iter().enumerate() {
                let mut buf = String::from("{\"header\":true}\n");
                let mut lines_at = vec![(0, buf.len() - 1)];
                for i in 0..lines {
                    let pad = if i % 2_000 == 7 { BLOCK + 5 } else { i % 300 };
                    let line = format!(
                        "{{\"seq\":{i},\"part\":{part},\"t\":\"é{}\"}}",
                        "ab".repeat(pad)
                    );
                    lines_at.push((buf.len(), buf.len() + line.len()));
                    spans.push((base + buf.len(), base + buf.len() + line.len()));
                    buf.push_str(&line);
                    buf.push_str(if i % 11 == 0 { "\r\n" } else { "\n" });
                    want.push(line);
                }
                let len = buf.len();
                taken.push(match compress {
                    true => Taken::compressed(base, &buf, &lines_at),
                    false => Taken::Buffer(buf),
                });
                base += len;
            }
            let mut t = Texts::default();
            for (s, e) in spans {
                t.push_span(s, e);
            }
            t.adopt(taken);
            (t, want)
        };
        // Two compressed texts and a buffer after them.
        let (mut t, want) = build(&[true, true, false], 6_000);
        let shared = blocks(&t, |b| matches!(b, Block::Shared(_)));
        assert_eq!(shared, 1, "only the buffer waits for the compressor");
        assert_eq!(blocks(&t, |b| matches!(b, Block::Raw(_))), 0);
        let pieces = blocks(&t, |b| matches!(b, Block::Lz4 { .. }));
        assert!(pieces > 10, "{pieces} pieces");
        reads_back(&mut t, want);
        // Compressed texts alone leave nothing for the compressor.
        let (mut t, want) = build(&[true, true], 6_000);
        assert!(t.compress(0), "nothing waits");
        assert_eq!(all(&t), want);
    }

    #[test]
    fn cuts_fall_only_where_a_text_starts_about_a_block_apart() {
        let starts = [
            0,
            10,
            BLOCK - 1,
            BLOCK + 10,
            BLOCK + 20,
            3 * BLOCK,
            5 * BLOCK,
        ];
        let cuts = cuts_at(starts.into_iter(), 4 * BLOCK);
        assert_eq!(cuts, vec![0, BLOCK + 10, 3 * BLOCK, 4 * BLOCK]);
        assert_eq!(cuts_at([0].into_iter(), 7), vec![0, 7]);
    }

    #[test]
    fn sealed_blocks_are_compressed_and_read_back_exactly() {
        // Many JSON-like texts across many blocks, some multi-byte, some
        // larger than a block; every read path gives them back as pushed.
        // The first half is compressed as blocks fill up, the rest by the
        // compressor thread, with pushes while it works.
        let mut t = Texts {
            compress_on_seal: true,
            ..Texts::default()
        };
        let mut want = Vec::new();
        for i in 0..40_000 {
            if i == 20_000 {
                t.compress_on_seal = false;
            }
            if i == 30_000 {
                assert!(!t.compress(0), "full raw blocks wait for the compressor");
            }
            let s = match i % 997 {
                0 => format!("{{\"big\":\"{}\"}}", "é".repeat(BLOCK / 2 + i % 7)),
                1 => String::new(),
                _ => format!(
                    "{{\"type\":\"assistant/chunk\",\"seq\":{i},\"data\":{{\"text\":\"ü{i}\"}}}}"
                ),
            };
            t.push(&s);
            want.push(s);
        }
        assert_eq!(all(&t), want, "while the compressor works");
        compress_all(&mut t, 0);
        let compressed = t
            .blocks
            .iter()
            .filter(|(_, b)| matches!(b, Block::Lz4 { .. }))
            .count();
        assert!(
            compressed > 10,
            "{compressed} of {} blocks compressed",
            t.blocks.len()
        );
        assert!(
            t.blocks[..t.blocks.len() - 1]
                .iter()
                .all(|(_, b)| matches!(b, Block::Lz4 { .. } | Block::Kept(_))),
            "every full block is compressed"
        );
        let held = held_bytes(&t);
        let raw: usize = want.iter().map(String::len).sum();
        assert!(held * 2 < raw, "held {held} of {raw}");
        assert_eq!(all(&t), want);
        // Random access in any order (each read may open another block).
        for i in (0..want.len()).rev().step_by(7) {
            assert_eq!(t.get(i).ok().as_deref(), Some(want[i].as_str()), "text {i}");
        }
        for (from, to) in [(0, 0), (0, 1), (5, 30_000), (39_990, 50_000)] {
            let got = visited(&t, from, to);
            let exp: Vec<Option<String>> = want[from..to.min(want.len())]
                .iter()
                .cloned()
                .map(Some)
                .collect();
            assert_eq!(got, exp, "{from}..{to}");
        }
        // A clone reads the same, with its own opened block.
        let c = t.clone();
        assert_eq!(c.get(12_345).ok().as_deref(), Some(want[12_345].as_str()));
        // A part of a text narrows to the same bytes.
        let x = t.get(2).unwrap_or(Text::Borrowed(""));
        let data = x.find("\"data\"").map_or(0, |p| p);
        let part = x[data..x.len() - 1].to_string();
        assert_eq!(&*x.clone().narrow_to(data, x.len() - 1), part.as_str());
        assert_eq!(&*x.narrow_to(3, 1), "", "not a part");
    }

    #[test]
    fn a_block_that_does_not_decompress_is_an_internal_error_never_a_made_up_text() {
        let mut t = Texts {
            compress_on_seal: true,
            ..Default::default()
        };
        let text = "{\"type\":\"x\",\"seq\":0,\"time\":1,\"data\":{\"t\":\"abcabcabc\"}}";
        for _ in 0..20_000 {
            t.push(text);
        }
        let k = t
            .blocks
            .iter()
            .position(|(_, b)| matches!(b, Block::Lz4 { .. }))
            .expect("a full block was compressed");
        if let (_, Block::Lz4 { bytes, .. }) = &mut t.blocks[k] {
            let half = bytes.len() / 2;
            bytes[..half].fill(0xff);
        }
        let inside = t
            .spans
            .iter()
            .position(|&(s, _)| t.block_of(s).map(|b| b.0) == Some(k));
        let err = t.get(inside.expect("a text in the block")).unwrap_err();
        assert_eq!(err.code(), "INTERNAL");
        assert!(
            err.to_string()
                .starts_with("a block of event texts does not decompress"),
            "{err}"
        );
        let mut seen = 0;
        let visited = t.visit(0, t.len(), |_, _| seen += 1);
        assert_eq!(visited.map_err(|e| e.code()), Err("INTERNAL"));
        assert!(seen < t.len());
    }

    /// Lines of JSON text, some holding long strings (escapes and
    /// non-Latin-1 text among them), and each line's span in them joined
    /// by newlines.
    fn lines_with_long_strings(n: usize) -> (String, Vec<(usize, usize)>) {
        let (mut buf, mut spans) = (String::new(), Vec::new());
        for i in 0..n {
            let long = match i % 5 {
                0 => format!(
                    "line {i}\\n\\t\\\"quoted\\\" {}",
                    "text ".repeat(20_000 + i)
                ),
                1 => format!("✓ {} \\ud800 end", "ü".repeat(15_000)),
                2 => format!("a\\/b {}", "z".repeat(70_000)),
                _ => format!("short {i}"),
            };
            let line =
                format!(r#"{{"type":"tool/result","seq":{i},"data":{{"out":"{long}","n":{i}}}}}"#);
            spans.push((buf.len(), buf.len() + line.len()));
            buf.push_str(&line);
            buf.push('\n');
        }
        (buf, spans)
    }

    #[test]
    fn a_prefix_holds_the_first_texts_whatever_their_blocks_hold() {
        // A read's buffer with a header before its first text and long
        // strings, then pushes that
        // fill raw blocks; compressed or not, the prefix at every kind of
        // cut (block starts, inside blocks, the ends) reads back the same
        // texts, takes pushes after them, and compresses to the same.
        let (buf, spans) = lines_with_long_strings(12);
        for compressed in [false, true] {
            let mut t = Texts::default();
            for &(s, e) in &spans {
                t.push_span(s + 5, e + 5);
            }
            adopt_buffers(&mut t, vec![format!("head\n{buf}")]);
            for i in 0..3_000 {
                t.push(&format!(
                    "{{\"pushed\":{i},\"pad\":\"{}\"}}",
                    "p".repeat(i % 400)
                ));
            }
            if compressed {
                compress_all(&mut t, 1);
            }
            let want = all(&t);
            let starts: Vec<usize> = t
                .blocks
                .iter()
                .map(|&(b, _)| t.spans.partition_point(|&(s, _)| s < b))
                .collect();
            let mut ends: Vec<usize> = (0..=14)
                .chain(starts.iter().flat_map(|&k| [k.saturating_sub(1), k, k + 1]))
                .collect();
            ends.extend([want.len() - 1, want.len(), want.len() + 3]);
            for end in ends {
                let mut p = t.prefix(end).expect("the texts read");
                let end = end.min(want.len());
                assert_eq!(all(&p), want[..end], "{compressed} {end}");
                p.push("after");
                compress_all(&mut p, 1);
                let mut more = want[..end].to_vec();
                more.push("after".to_string());
                assert_eq!(all(&p), more, "{compressed} {end} after a push");
            }
            assert_eq!(all(&t), want, "the texts taken from are as they were");
        }
    }

    #[test]
    fn texts_taken_compressed_read_back_as_the_owned_ones_compressed_later() {
        let (buf, spans) = lines_with_long_strings(40);
        let want: Vec<String> = spans.iter().map(|&(s, e)| buf[s..e].to_string()).collect();
        // The caller's bytes, taken compressed as they are read.
        let mut taken = Texts::default();
        for &(s, e) in &spans {
            taken.push_span(s, e);
        }
        taken.adopt(vec![Taken::compressed(0, &buf, &spans)]);
        // Buffers the log owns, for the compressor.
        let mut owned = Texts::default();
        for &(s, e) in &spans {
            owned.push_span(s, e);
        }
        adopt_buffers(&mut owned, vec![buf.clone()]);
        compress_all(&mut owned, 1);
        for t in [&mut taken, &mut owned] {
            assert!(blocks(t, |b| matches!(b, Block::Lz4 { .. })) > 1);
            reads_back(t, want.clone());
        }
    }
}
