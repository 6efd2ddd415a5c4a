//! The files a store keeps between processes (the content index, the grep memo): a body of
//! little-endian integers and bytes followed by its checksum, written to a temporary name beside
//! the target and renamed into place, so a reader never sees half a file and a crash leaves the
//! old one. A file that is missing, truncated or fails its checksum reads as nothing.

use std::{fs, io::Write, path::Path};

/// Appends `body`'s checksum and writes it to `path` atomically, creating its directory.
pub(crate) fn write_checked(path: &Path, mut body: Vec<u8>) -> std::io::Result<()> {
    let sum = fnv1a(&body);
    body.extend_from_slice(&sum.to_le_bytes());
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let written = fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(&body)?;
        f.sync_all()
    });
    match written.and_then(|()| fs::rename(&tmp, path)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The body of the file at `path` (its checksum removed), or `None` when the file is missing,
/// shorter than a checksum or fails it.
pub(crate) fn read_checked(path: &Path) -> Option<Vec<u8>> {
    let mut data = fs::read(path).ok()?;
    let body_len = data.len().checked_sub(8)?;
    let sum = u64::from_le_bytes(data[body_len..].try_into().ok()?);
    data.truncate(body_len);
    (fnv1a(&data) == sum).then_some(data)
}

/// Appends a blob id's 20 bytes; other hash kinds are refused (the files' ids are SHA-1).
pub(crate) fn put_id(out: &mut Vec<u8>, id: &gix::oid) -> std::io::Result<()> {
    let bytes = id.as_bytes();
    if bytes.len() != 20 {
        return Err(std::io::Error::other("only SHA-1 repositories are persisted"));
    }
    out.extend_from_slice(bytes);
    Ok(())
}

/// Appends `bytes` after their length (a `u32`); [`Reader::bytes`] reads them back.
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> std::io::Result<()> {
    out.extend_from_slice(&len32(bytes.len())?.to_le_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// `n` as the `u32` a file stores counts in.
pub(crate) fn len32(n: usize) -> std::io::Result<u32> {
    u32::try_from(n).map_err(|_| std::io::Error::other("too large to persist"))
}

/// 64-bit FNV-1a, the files' checksum: catches truncation and torn or flipped bytes.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// Reads a body front to back; every read is `None` past its end.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.data.len()
    }

    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.data.split_at_checked(n)?;
        self.data = rest;
        Some(head)
    }

    pub(crate) fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// Bytes written by [`put_bytes`].
    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    /// A blob id written by [`put_id`].
    pub(crate) fn id(&mut self) -> Option<gix::ObjectId> {
        gix::ObjectId::try_from(self.take(20)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_body_reads_back_and_any_damage_reads_as_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/file.bin");
        write_checked(&path, b"hello body".to_vec()).expect("write");
        assert_eq!(read_checked(&path).as_deref(), Some(&b"hello body"[..]));
        let full = fs::read(&path).expect("read");
        for cut in [0, 7, full.len() - 1] {
            fs::write(&path, &full[..cut]).expect("truncate");
            assert_eq!(read_checked(&path), None, "cut at {cut}");
        }
        let mut flipped = full.clone();
        flipped[3] ^= 1;
        fs::write(&path, &flipped).expect("flip");
        assert_eq!(read_checked(&path), None);
        assert_eq!(read_checked(&dir.path().join("missing")), None);
        assert_eq!(fs::read_dir(dir.path().join("sub")).expect("dir").count(), 1, "no temporary file is left");
    }
}
