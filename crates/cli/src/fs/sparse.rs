//! A local file written so that runs of zeros stay holes, as `cp --sparse=auto` leaves them:
//! `get` of a sparse Tessera file takes no more local space than its data.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

/// Zeros are looked for in blocks of this size; a smaller run is written.
const BLOCK: usize = 64 << 10;

/// Writes through to `file`, seeking over whole blocks of zeros; `flush` sets the length, so
/// a file ending in zeros keeps its size.
pub struct SparseWriter {
    file: File,
    position: u64,
}

impl SparseWriter {
    pub fn new(file: File) -> SparseWriter {
        SparseWriter { file, position: 0 }
    }
}

impl Write for SparseWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for block in buf.chunks(BLOCK) {
            if block.len() == BLOCK && block.iter().all(|b| *b == 0) {
                self.file.seek(SeekFrom::Current(BLOCK as i64))?;
            } else {
                self.file.write_all(block)?;
            }
            self.position += block.len() as u64;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.file.metadata()?.len() < self.position {
            self.file.set_len(self.position)?;
        }
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    #[test]
    fn zero_blocks_become_holes_and_the_size_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        let mut data = vec![0u8; 64 * BLOCK];
        data[10] = 1;
        data[40 * BLOCK + 3] = 2;
        let mut w = SparseWriter::new(File::create(&path).unwrap());
        w.write_all(&data[..5 * BLOCK + 7]).unwrap();
        w.write_all(&data[5 * BLOCK + 7..]).unwrap();
        w.flush().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.blocks() * 512 < 8 * BLOCK as u64, "{} bytes allocated for 2 data blocks", meta.blocks() * 512);
    }
}
