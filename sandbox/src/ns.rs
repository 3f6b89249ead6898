//! Namespaces, identities and mounts: the system calls libc does not wrap (`clone` with
//! namespace flags, the new mount API) and the user-namespace id maps.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The namespaces of their own that the zygote and each command's init are cloned into (the
/// network namespace is added where commands have one).
pub(super) const EVERY_COMMAND: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// What may stand in the way of namespaces, for the refusal.
pub(super) const NAMESPACE_HINT: &str = " (user namespaces may be disabled, see the sysctls \
                                         user.max_user_namespaces and \
                                         kernel.unprivileged_userns_clone, or refused by a \
                                         container's seccomp profile, which must allow clone \
                                         and unshare with CLONE_NEWUSER)";

/// The user (and group) a command runs as, outside its user namespace, when cordon runs as
/// root: `nobody`, who owns nothing of the system. Inside, it is uid 0.
pub(super) const SANDBOX_ID: u32 = 65534;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const MOUNT_ATTR_IDMAP: u64 = 0x10_0000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// How a bound tree may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// Read and execute.
    ReadOnly,
    /// Read, write and execute.
    Writable,
    /// Device nodes, read-only mount (the nodes themselves stay usable).
    Devices,
}

impl Access {
    fn attrs(self) -> u64 {
        match self {
            Access::ReadOnly => MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            Access::Writable => MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            Access::Devices => MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        }
    }
}

pub(super) fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path contains a NUL byte"))
}

fn check(result: libc::c_long) -> io::Result<libc::c_long> {
    if result < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// A detached copy of the mount tree at `path` (submounts included), to attach elsewhere with
/// [`attach`]. `path` is canonical: a symbolic link put in its place since is not followed.
pub(super) fn open_tree(path: &Path) -> io::Result<OwnedFd> {
    clone_tree(
        libc::AT_FDCWD,
        &cpath(path)?,
        libc::AT_SYMLINK_NOFOLLOW as libc::c_uint,
    )
}

/// `open_tree(2)` with `OPEN_TREE_CLONE | AT_RECURSIVE` and `flags`.
fn clone_tree(dirfd: i32, path: &CStr, flags: libc::c_uint) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string and flags; the result is checked.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            dirfd,
            path.as_ptr(),
            OPEN_TREE_CLONE | AT_RECURSIVE | flags | libc::O_CLOEXEC as libc::c_uint,
        )
    })?;
    // SAFETY: a descriptor just returned by the kernel, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// `struct open_how` of `openat2(2)`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;
const RESOLVE_BENEATH: u64 = 0x08;

/// An `O_PATH` descriptor of `rel` beneath the directory `dir`, refusing `..` out of it and
/// every symbolic link on the way (the last component included): what a command could have
/// swapped in cannot redirect it.
pub(super) fn open_beneath(dir: &OwnedFd, rel: &Path) -> io::Result<OwnedFd> {
    let rel = cpath(rel)?;
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: 0,
        resolve: RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: a valid descriptor, C string and `open_how` of the size given.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            rel.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    })?;
    // SAFETY: a descriptor just returned by the kernel, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// A detached copy of the tree at the `O_PATH` descriptor `at` (see [`open_tree`]).
pub(super) fn open_tree_of(at: &OwnedFd) -> io::Result<OwnedFd> {
    clone_tree(at.as_raw_fd(), c"", libc::AT_EMPTY_PATH as libc::c_uint)
}

fn set_attr(dirfd: i32, path: &CStr, flags: libc::c_uint, attr: &MountAttr) -> io::Result<()> {
    // SAFETY: a valid C string and a `mount_attr` of the size given.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
    .map(drop)
}

/// Makes the files of the detached `tree` appear owned by the users of `userns`'s map: on
/// disk uid 0 shows as the uid that 0 maps to.
pub(super) fn idmap(tree: &OwnedFd, userns: &OwnedFd) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    set_attr(
        tree.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
        &attr,
    )
}

/// Attaches the detached `tree` at `target` and restricts it (and its submounts) to `access`.
pub(super) fn attach(tree: &OwnedFd, target: &Path, access: Access) -> io::Result<()> {
    let target = cpath(target)?;
    // SAFETY: a valid descriptor and C strings; the result is checked.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })?;
    restrict(&target, access.attrs(), AT_RECURSIVE)
}

/// Attaches the detached `tree`, restricted to `access`, onto what the `O_PATH` descriptor
/// `at` refers to: the very file or directory opened, whatever its name leads to since.
pub(super) fn attach_onto(tree: &OwnedFd, at: &OwnedFd, access: Access) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: access.attrs(),
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    set_attr(
        tree.as_raw_fd(),
        c"",
        libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
        &attr,
    )?;
    // SAFETY: valid descriptors and C strings; the result is checked.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            at.as_raw_fd(),
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// Adds mount attributes to the mount at `path` (only adds: a locked attribute cannot be
/// cleared anyway).
fn restrict(path: &CStr, attrs: u64, flags: libc::c_uint) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: attrs,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    set_attr(libc::AT_FDCWD, path, flags, &attr)
}

/// Makes the mount at `path` read-only (itself, not its submounts).
pub(super) fn read_only(path: &Path) -> io::Result<()> {
    restrict(
        &cpath(path)?,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
        0,
    )
}

/// Binds `path` onto itself read-only (to freeze a part of a writable tree such as `/proc/sys`).
pub(super) fn freeze(path: &Path) -> io::Result<()> {
    mount(Some(path), path, None, libc::MS_BIND | libc::MS_REC, None)?;
    restrict(
        &cpath(path)?,
        MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
        AT_RECURSIVE,
    )
}

/// `mount(2)`.
pub(super) fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cpath).transpose()?;
    let target = cpath(target)?;
    let data = data
        .map(|d| CString::new(d).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput)))
        .transpose()?;
    // SAFETY: valid C strings or null pointers; the result is checked.
    check(unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        ) as libc::c_long
    })
    .map(drop)
}

/// Makes every mount of this process's mount namespace private, so that nothing mounted here
/// propagates back to the namespace it was copied from.
pub(super) fn make_private() -> io::Result<()> {
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
}

/// Detaches the mount at `path` from the tree (it lives on while anything uses it).
pub(super) fn detach(path: &Path) -> io::Result<()> {
    let path = cpath(path)?;
    // SAFETY: a valid C string; the result is checked.
    check(unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } as libc::c_long).map(drop)
}

/// Makes the directory `root` (a mount point) the root of this mount namespace and detaches
/// the old root, so nothing outside `root` stays reachable.
pub(super) fn pivot_into(root: &Path) -> io::Result<()> {
    std::env::set_current_dir(root)?;
    // SAFETY: valid C strings; the results are checked. pivot_root(".", ".") stacks the old
    // root on top of the new one, where it is then detached.
    unsafe {
        check(libc::syscall(
            libc::SYS_pivot_root,
            c".".as_ptr(),
            c".".as_ptr(),
        ))?;
        check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH) as libc::c_long)?;
    }
    std::env::set_current_dir("/")
}

/// Like `fork(2)`, with the child in the new namespaces of `flags` (`CLONE_NEW*`): 0 in the
/// child, its pid in the parent.
pub(super) fn clone(flags: libc::c_int) -> io::Result<libc::pid_t> {
    // SAFETY: with a null stack, clone continues the child on a copy of the caller's stack, as
    // fork does; the caller is single-threaded.
    let pid = check(unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    })?;
    Ok(pid as libc::pid_t)
}

/// Writes the id maps of `pid`'s new user namespace: for the sandbox user, uid and gid 0 inside are
/// [`SANDBOX_ID`] outside; for another user, the user's own uid and gid map to themselves (the
/// only map an unprivileged process may write).
pub(super) fn write_maps(pid: libc::pid_t, sandbox_user: bool) -> io::Result<()> {
    let proc = format!("/proc/{pid}");
    let (uid_map, gid_map) = if sandbox_user {
        let map = format!("0 {SANDBOX_ID} 1\n");
        (map.clone(), map)
    } else {
        std::fs::write(format!("{proc}/setgroups"), "deny")?;
        // SAFETY: no arguments.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        (format!("{uid} {uid} 1\n"), format!("{gid} {gid} 1\n"))
    };
    std::fs::write(format!("{proc}/uid_map"), uid_map)?;
    std::fs::write(format!("{proc}/gid_map"), gid_map)
}

/// Whether commands run as [`SANDBOX_ID`]: cordon is root, in a user namespace where that id
/// exists (the host's; not the root of a rootless container, which maps only itself).
pub(super) fn runs_as_sandbox_user() -> bool {
    // SAFETY: no arguments.
    let root = unsafe { libc::geteuid() } == 0;
    let mapped = |file: &str| {
        std::fs::read_to_string(file).is_ok_and(|map| {
            map.lines().any(|line| {
                let n: Vec<u64> = line
                    .split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect();
                matches!(n[..], [inside, _, count]
                    if (inside..inside + count).contains(&u64::from(SANDBOX_ID)))
            })
        })
    };
    root && mapped("/proc/self/uid_map") && mapped("/proc/self/gid_map")
}

/// A user namespace whose uid and gid 0 are [`SANDBOX_ID`] (root only): the id map of the
/// workspace's mount, which makes root's files there the sandbox user's.
pub(super) fn sandbox_userns() -> io::Result<OwnedFd> {
    let (hold_read, hold_write) = super::process::pipe()?;
    let pid = clone(libc::CLONE_NEWUSER)?;
    if pid == 0 {
        drop(hold_write);
        // Wait until the parent has the namespace, then go.
        let _ = File::from(hold_read).read(&mut [0]);
        // SAFETY: exiting the child without unwinding.
        unsafe { libc::_exit(0) };
    }
    drop(hold_read);
    let opened = write_maps(pid, true)
        .and_then(|()| File::open(format!("/proc/{pid}/ns/user")).map(OwnedFd::from));
    drop(hold_write);
    // SAFETY: reaping the child just made.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
    opened
}

/// Takes on uid and gid 0 of the user namespace, with no supplementary group (root only,
/// whose map makes them [`SANDBOX_ID`]).
pub(super) fn become_sandbox_user() -> io::Result<()> {
    // SAFETY: plain system calls; the results are checked.
    unsafe {
        check(libc::setresgid(0, 0, 0) as libc::c_long)?;
        check(libc::setgroups(0, std::ptr::null()) as libc::c_long)?;
        check(libc::setresuid(0, 0, 0) as libc::c_long)?;
    }
    Ok(())
}

/// Brings up the loopback interface of the calling process's network namespace.
pub(super) fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket for the ioctls, owned at once; `request` is a valid ifreq naming "lo".
    unsafe {
        let fd = check(
            libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) as libc::c_long,
        )?;
        let socket = OwnedFd::from_raw_fd(fd as i32);
        let mut request: libc::ifreq = std::mem::zeroed();
        for (to, from) in request.ifr_name.iter_mut().zip(b"lo") {
            *to = *from as libc::c_char;
        }
        check(libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) as libc::c_long)?;
        request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        check(libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) as libc::c_long)?;
    }
    Ok(())
}
