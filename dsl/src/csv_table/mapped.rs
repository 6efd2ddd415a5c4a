//! An input file's bytes, mapped rather than read: the fast readers parse
//! big logs straight from the page cache, with no copy into a fresh buffer
//! (whose zeroed pages cost as much as the copy), and a writer that re-reads
//! the input can hand back the pages it has finished with, so that the input
//! never sits in memory whole beside the outputs.

use std::fs::File;
use std::ops::Deref;
use std::path::Path;

/// Bytes of a file: a read-only mapping, or the file read into memory where
/// a mapping is not possible (an empty file, a pipe, a file system that
/// refuses `mmap`).
///
/// A mapping reflects the file: a file truncated by another process while it
/// is mapped makes reading the lost pages fail (`SIGBUS`), the caveat every
/// mmap-based reader (ripgrep included) accepts. The readers here re-check
/// what they read (row counts, a file that changed while it was evaluated),
/// but a file must not be rewritten in place while `rewardlab` reads it.
#[derive(Debug)]
pub struct MappedFile {
    bytes: Bytes,
}

#[derive(Debug)]
enum Bytes {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl MappedFile {
    /// Maps (or reads) the whole file at `path`.
    pub fn open(path: &Path) -> std::io::Result<MappedFile> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len > 0 {
            // SAFETY: the mapping is read-only and only ever read through
            // `&[u8]`; see the type's documentation for a file changed while
            // it is mapped.
            // Pages are mapped as they are first read (not populated up
            // front), so that a reader that releases what it has parsed
            // never holds the whole file.
            let mapped = unsafe { memmap2::Mmap::map(&file) };
            if let Ok(map) = mapped {
                // Sequential hint: the kernel reads ahead on a cold cache.
                let _ = map.advise(memmap2::Advice::Sequential);
                return Ok(MappedFile { bytes: Bytes::Mapped(map) });
            }
        }
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut { file }, &mut data)?;
        Ok(MappedFile { bytes: Bytes::Read(data) })
    }

    /// Tells the kernel that the bytes of `part` (a slice of this file's
    /// bytes) will not be read again soon: the pages wholly inside it leave
    /// this process's memory (they stay in the page cache, and reading them
    /// again maps them back). Does nothing for a file that was read, or for a
    /// slice of other memory.
    pub fn release(&self, part: &[u8]) {
        let Bytes::Mapped(map) = &self.bytes else {
            return;
        };
        let base = map.as_ptr() as usize;
        let (start, end) = (part.as_ptr() as usize, part.as_ptr() as usize + part.len());
        if start < base || end > base + map.len() {
            return;
        }
        // The mapping starts on a page boundary: round the range inwards.
        let first = (start - base).next_multiple_of(PAGE);
        let last = (end - base) & !(PAGE - 1);
        if last > first {
            // SAFETY: MADV_DONTNEED on a read-only file mapping only unmaps
            // the pages from this process: a later read of the range sees
            // the file's bytes again, so every slice into the mapping stays
            // valid and unchanged.
            let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, last - first) };
        }
    }
}

/// The smallest page size of the platforms served; a larger page only makes
/// [`MappedFile::release`] keep up to one more page.
const PAGE: usize = 4096;

impl Deref for MappedFile {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Mapped(map) => map,
            Bytes::Read(data) => data,
        }
    }
}
