//! A cached artifact on its way in: authenticated, then handed to wasmtime with no chance for
//! anyone to change it in between.
//!
//! An artifact is its MAC followed by its code. The code is copied from the file into a memory
//! file (memfd) through a small buffer, the MAC computed over the very bytes written; the memory
//! file is then sealed against every change and wasmtime maps it. Reading the file into memory
//! and deserializing from there, as cordon did before, copied the code twice in this process:
//! once to read it, once more into wasmtime's own mapping, and each copy faulted in a page
//! every 4 KiB (46 % of the page faults of a one-shot `cordon call read_file`). Where memory
//! files cannot be made or reopened (no `/proc`), the code is read into memory as before.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use rustix::fs::{MemfdFlags, SealFlags};
use wasmtime::component::Component;

/// The length of the cache key and of an artifact's MAC, which precedes the compiled code.
pub(super) const KEY_LEN: usize = 32;

/// How much of an artifact is copied at a time.
const CHUNK: usize = 64 << 10;

/// An artifact's authenticated code, where no one can change it.
pub(super) enum Code {
    /// In a sealed memory file.
    Sealed(File),
    /// In this process's memory.
    Read(Vec<u8>),
}

impl Code {
    /// The code of the artifact at `path` named `name_hash`, when its MAC under `key` is
    /// right (`None`: changed, cut short, or made under another key or name).
    pub(super) fn open(
        path: &Path,
        key: &[u8; KEY_LEN],
        name_hash: &[u8; 32],
    ) -> io::Result<Option<Code>> {
        Self::open_into(sealable(), path, key, name_hash)
    }

    /// [`Code::open`], the code copied into `memory_file`, or read into memory when there is
    /// none.
    fn open_into(
        memory_file: Option<File>,
        path: &Path,
        key: &[u8; KEY_LEN],
        name_hash: &[u8; 32],
    ) -> io::Result<Option<Code>> {
        let mut file = File::open(path)?;
        let mut tag = [0; KEY_LEN];
        match file.read_exact(&mut tag) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            read => read?,
        }
        let mut mac = keyed(key, name_hash);
        let code = match memory_file {
            Some(mut memfd) => {
                copy_through(&mut file, &mut mac, &mut memfd)?;
                rustix::fs::fcntl_add_seals(
                    &memfd,
                    SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
                )?;
                Code::Sealed(memfd)
            }
            None => {
                let mut bytes = Vec::with_capacity(file.metadata()?.len() as usize);
                copy_through(&mut file, &mut mac, &mut bytes)?;
                Code::Read(bytes)
            }
        };
        // `blake3::Hash` compares in constant time.
        Ok((blake3::Hash::from_bytes(tag) == mac.finalize()).then_some(code))
    }

    /// The component this code is the compiled form of.
    ///
    /// # Safety
    ///
    /// The code must be what `engine`'s configuration serialized: [`Code::open`] gives only
    /// code whose MAC under the cache's key is right, which only cordon could have written.
    pub(super) unsafe fn deserialize(
        &self,
        engine: &wasmtime::Engine,
    ) -> wasmtime::Result<Component> {
        // SAFETY: as the caller promised; the memory file is sealed against writes, so what
        // wasmtime maps stays what was checked.
        unsafe {
            match self {
                Code::Sealed(memfd) => Component::deserialize_file(engine, reopened(memfd)),
                Code::Read(bytes) => Component::deserialize(engine, bytes),
            }
        }
    }
}

/// A new memory file that can be sealed; `None` where it cannot be made or reopened by
/// [`reopened`]'s path.
fn sealable() -> Option<File> {
    let memfd = rustix::fs::memfd_create(
        "cordon-artifact",
        MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
    )
    .ok()?;
    let memfd = File::from(memfd);
    reopened(&memfd).exists().then_some(memfd)
}

/// The path that opens `memfd` again: wasmtime 48 maps a component's code only from a path.
fn reopened(memfd: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", memfd.as_raw_fd()))
}

/// Copies the rest of `from` into `to`, each byte fed to `mac` on its way: what is checked is
/// what was written.
fn copy_through(from: &mut File, mac: &mut blake3::Hasher, to: &mut impl Write) -> io::Result<()> {
    let mut chunk = vec![0; CHUNK];
    loop {
        let n = match from.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        mac.update(&chunk[..n]);
        to.write_all(&chunk[..n])?;
    }
}

/// A MAC under `key` over the artifact named `name_hash`, its code still to come.
fn keyed(key: &[u8; KEY_LEN], name_hash: &[u8; 32]) -> blake3::Hasher {
    let mut hasher = blake3::Hasher::new_keyed(key);
    hasher.update(name_hash);
    hasher
}

/// The MAC of the artifact `code` named `name_hash` under `key`.
pub(super) fn mac(key: &[u8; KEY_LEN], name_hash: &[u8; 32], code: &[u8]) -> blake3::Hash {
    keyed(key, name_hash).update(code).finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_memory_file_the_code_is_read_and_checked_as_well() {
        let dir = tempfile::tempdir().unwrap();
        let engine = wasmtime::Engine::default();
        // An empty component: the magic number, version 0x0d, layer 1.
        let code = Component::new(&engine, b"\0asm\x0d\0\x01\0")
            .unwrap()
            .serialize()
            .unwrap();
        let (key, name_hash) = ([7; KEY_LEN], [9; 32]);
        let path = dir.path().join("artifact");
        let artifact = [mac(&key, &name_hash, &code).as_bytes(), &code[..]].concat();
        std::fs::write(&path, &artifact).unwrap();
        let read = Code::open_into(None, &path, &key, &name_hash).unwrap();
        let Some(read @ Code::Read(_)) = read else {
            panic!("authentic, and read into memory");
        };
        // SAFETY: authenticated above.
        unsafe { read.deserialize(&engine) }.expect("the code it checked");

        let mut changed = artifact.clone();
        *changed.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &changed).unwrap();
        assert!(
            Code::open_into(None, &path, &key, &name_hash)
                .unwrap()
                .is_none()
        );
        std::fs::write(&path, &artifact[..KEY_LEN - 1]).unwrap();
        assert!(
            Code::open_into(None, &path, &key, &name_hash)
                .unwrap()
                .is_none()
        );
    }
}
