//! The seccomp program each command's init installs last: it refuses the system calls that
//! reach past the sandbox (other processes' memory, namespaces and mounts, kernel interfaces
//! shared with the host, System V IPC), those whose checks live in memory a filter cannot read
//! (`clone3`, `openat2`, io_uring), set-ID modes, namespace flags of `clone` and, by policy,
//! socket families.
//!
//! It is written here as one program rather than built by seccompiler, because installing a
//! filter makes the kernel run it once for every system call number (to cache which ones are
//! always allowed), and that cost, paid for every command, grows with the comparisons an
//! allowed call goes through: seccompiler's programs compare the number with each listed call
//! in turn (five instructions each), where this one searches a binary tree. The two programs
//! this replaces took about 0.2 ms to install for each command; this one about 0.04 ms.

use seccompiler::{BpfProgram, sock_filter};

use super::Network;

/// System calls that fail with `EPERM`.
const DENIED: &[i64] = &[
    // Other processes' memory and descriptors.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    // Namespaces and mounts.
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_open_by_handle_at,
    // Kernel interfaces shared with the host.
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
    // System V and POSIX message-queue IPC (shared with the host's processes).
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_mq_open,
    libc::SYS_mq_unlink,
    libc::SYS_mq_timedsend,
    libc::SYS_mq_timedreceive,
    libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr,
];

/// System calls that fail with `ENOSYS`, so that libraries fall back to older ones.
const UNIMPLEMENTED: &[i64] = &[
    // Its flags are in memory, out of a filter's reach; C libraries fall back to clone.
    libc::SYS_clone3,
    // Its mode is in memory, out of a filter's reach (see MODE_SETTERS); libraries fall back
    // to openat.
    libc::SYS_openat2,
    // Operations that bypass system-call filtering (sockets among them).
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The system calls that give a file its mode: (number, index of the mode argument, whether
/// the mode only counts when the flags before it create a file).
const MODE_SETTERS: [(i64, u8, bool); 5] = [
    (libc::SYS_fchmod, 1, false),
    (libc::SYS_fchmodat, 2, false),
    (libc::SYS_fchmodat2, 2, false),
    (libc::SYS_mknodat, 2, false),
    (libc::SYS_openat, 3, true),
];

/// The older x86-64 system calls that do the same.
#[cfg(target_arch = "x86_64")]
const LEGACY_MODE_SETTERS: [(i64, u8, bool); 4] = [
    (libc::SYS_chmod, 1, false),
    (libc::SYS_mknod, 1, false),
    (libc::SYS_creat, 1, false),
    (libc::SYS_open, 2, true),
];
#[cfg(not(target_arch = "x86_64"))]
const LEGACY_MODE_SETTERS: [(i64, u8, bool); 0] = [];

/// `clone` flags that create namespaces (`CLONE_NEWTIME` shares its bit with the exit signal
/// in `clone`, which cannot create a time namespace anyway).
const NAMESPACE_FLAGS: [libc::c_int; 7] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
];

/// How a call is refused, if it is.
enum Rule {
    /// Whatever its arguments, with `EPERM`.
    Denied,
    /// Whatever its arguments, with `ENOSYS`.
    Unimplemented,
    /// With `EPERM` when its arguments are so.
    When(Check),
}

/// The arguments that make a call refused with `EPERM`.
enum Check {
    /// Argument `arg` has any of `bits` set.
    AnyBit { arg: u8, bits: u32 },
    /// Argument `mode` has a set-ID bit and argument `flags` creates a file.
    CreatingSetId { flags: u8, mode: u8 },
    /// Argument 0 is none of these (socket families).
    NoneOf(Vec<u32>),
}

/// The set-user-ID and set-group-ID bits of a mode.
const SET_ID: u32 = libc::S_ISUID | libc::S_ISGID;

/// Why there is no seccomp filter: cordon has none for this architecture.
#[derive(Debug, thiserror::Error)]
#[error("cordon has no seccomp filter for the {arch} architecture")]
pub(super) struct NoFilter {
    arch: &'static str,
}

/// The program for commands under `network`; Unix sockets are allowed where `allow_unix`
/// (Landlock confines them), and where the network is open.
pub(super) fn program(network: &Network, allow_unix: bool) -> Result<BpfProgram, NoFilter> {
    let Some(arch) = AUDIT_ARCH else {
        return Err(NoFilter {
            arch: std::env::consts::ARCH,
        });
    };
    Ok(assemble(arch, &rules(network, allow_unix)))
}

/// The rule of each refused call, by number.
fn rules(network: &Network, allow_unix: bool) -> Vec<(u32, Rule)> {
    let mut rules: Vec<(u32, Rule)> = Vec::new();
    rules.extend(DENIED.iter().map(|&nr| (nr as u32, Rule::Denied)));
    rules.extend(
        UNIMPLEMENTED
            .iter()
            .map(|&nr| (nr as u32, Rule::Unimplemented)),
    );
    let namespaces = NAMESPACE_FLAGS
        .iter()
        .fold(0, |all, &flag| all | flag as u32);
    rules.push((
        libc::SYS_clone as u32,
        Rule::When(Check::AnyBit {
            arg: 0,
            bits: namespaces,
        }),
    ));
    // Set-user-ID and set-group-ID files keep their power outside the sandbox (as root, what
    // the command creates in the workspace belongs to root on disk): no mode with those bits.
    for &(nr, mode, creating) in MODE_SETTERS.iter().chain(&LEGACY_MODE_SETTERS) {
        let check = match creating {
            // open(2) reads its mode only when it creates a file.
            true => Check::CreatingSetId {
                flags: mode - 1,
                mode,
            },
            false => Check::AnyBit {
                arg: mode,
                bits: SET_ID,
            },
        };
        rules.push((nr as u32, Rule::When(check)));
    }
    // The address families `socket(2)` may create; none: any.
    let families = match network {
        // TCP and UDP on the namespace's loopback (where the proxy listens, with an
        // allowlist): nothing else is there to reach.
        Network::Off | Network::Allow(_) => Some(vec![libc::AF_INET as u32, libc::AF_INET6 as u32]),
        Network::Open => None,
    };
    if let Some(mut families) = families {
        if allow_unix {
            families.push(libc::AF_UNIX as u32);
        }
        let rule = match families.is_empty() {
            true => Rule::Denied,
            false => Rule::When(Check::NoneOf(families)),
        };
        rules.push((libc::SYS_socket as u32, rule));
    }
    rules.sort_unstable_by_key(|(nr, _)| *nr);
    rules
}

/// Where a jump goes: the next instruction, or a label.
#[derive(Clone, Copy)]
enum To {
    Next,
    Label(usize),
}

/// The labels every program has: its four outcomes.
const ALLOW: usize = 0;
const EPERM: usize = 1;
const ENOSYS: usize = 2;
const KILL: usize = 3;

/// A program under construction, its jumps to labels resolved at the end.
struct Assembler {
    ops: Vec<(u32, To, To, u32)>,
    /// Where each label is, once placed.
    labels: Vec<Option<usize>>,
}

impl Assembler {
    fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }

    fn place(&mut self, label: usize) {
        self.labels[label] = Some(self.ops.len());
    }

    /// An instruction that goes on to the next one.
    fn op(&mut self, code: u32, k: u32) {
        self.ops.push((code, To::Next, To::Next, k));
    }

    /// Loads the 32 bits of `seccomp_data` at `offset`.
    fn load(&mut self, offset: u32) {
        self.op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, offset);
    }

    /// Loads the low 32 bits of argument `arg` (as seccompiler's 32-bit comparisons did).
    fn load_arg(&mut self, arg: u8) {
        // seccomp_data.args[arg], whose low half comes first on a little-endian machine.
        self.load(16 + 8 * u32::from(arg));
    }

    fn jump(&mut self, test: u32, k: u32, yes: To, no: To) {
        self.ops
            .push((libc::BPF_JMP | test | libc::BPF_K, yes, no, k));
    }

    /// Jumps where the first of `cases` equal to the loaded value says, else to `otherwise`.
    fn cases(&mut self, cases: impl ExactSizeIterator<Item = (u32, To)>, otherwise: To) {
        let last = cases.len().saturating_sub(1);
        for (i, (value, to)) in cases.enumerate() {
            let no = if i == last { otherwise } else { To::Next };
            self.jump(libc::BPF_JEQ, value, to, no);
        }
    }

    fn and(&mut self, k: u32) {
        self.op(libc::BPF_ALU | libc::BPF_AND | libc::BPF_K, k);
    }

    fn ret(&mut self, value: u32) {
        self.op(libc::BPF_RET | libc::BPF_K, value);
    }

    fn finish(self) -> BpfProgram {
        let at = |label: usize| self.labels[label].expect("every label placed");
        (self.ops.iter().enumerate())
            .map(|(i, &(code, yes, no, k))| {
                // Jumps only go forward, and not far: the program is short.
                let offset = |to: To| match to {
                    To::Next => 0,
                    To::Label(label) => {
                        u8::try_from(at(label) - i - 1).expect("a short forward jump")
                    }
                };
                sock_filter {
                    code: code as u16,
                    jt: offset(yes),
                    jf: offset(no),
                    k,
                }
            })
            .collect()
    }
}

/// The program that applies `rules` (sorted by number) on `arch`; other architectures are
/// killed, and (on x86-64) every x32 system call (numbers with bit 30 set, which a filter
/// keyed on plain numbers would let through) fails with `ENOSYS`.
fn assemble(arch: u32, rules: &[(u32, Rule)]) -> BpfProgram {
    let mut asm = Assembler {
        ops: Vec::new(),
        labels: vec![None; 4],
    };
    // seccomp_data.arch, at offset 4; seccomp_data.nr, at offset 0.
    asm.load(4);
    asm.jump(libc::BPF_JEQ, arch, To::Next, To::Label(KILL));
    asm.load(0);
    if cfg!(target_arch = "x86_64") {
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        asm.jump(libc::BPF_JSET, X32_SYSCALL_BIT, To::Label(ENOSYS), To::Next);
    }
    let targets: Vec<(u32, usize)> = (rules.iter())
        .map(|(nr, rule)| match rule {
            Rule::Denied => (*nr, EPERM),
            Rule::Unimplemented => (*nr, ENOSYS),
            Rule::When(_) => (*nr, asm.label()),
        })
        .collect();
    tree(&mut asm, &targets);
    for ((_, rule), &(_, label)) in rules.iter().zip(&targets) {
        if let Rule::When(check) = rule {
            asm.place(label);
            emit(&mut asm, check);
        }
    }
    for (label, value) in [
        (ALLOW, libc::SECCOMP_RET_ALLOW),
        (EPERM, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        (ENOSYS, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        (KILL, libc::SECCOMP_RET_KILL_PROCESS),
    ] {
        asm.place(label);
        asm.ret(value);
    }
    asm.finish()
}

/// The most numbers compared one after another at a leaf of [`tree`].
const LEAF: usize = 4;

/// Jumps to the label of the loaded number among `targets` (sorted by number), or to allow
/// when it is none of them: a binary search, then a few comparisons.
fn tree(asm: &mut Assembler, targets: &[(u32, usize)]) {
    if targets.len() <= LEAF {
        let cases = targets.iter().map(|&(nr, label)| (nr, To::Label(label)));
        return asm.cases(cases, To::Label(ALLOW));
    }
    let (low, high) = targets.split_at(targets.len() / 2);
    let higher = asm.label();
    asm.jump(libc::BPF_JGE, high[0].0, To::Label(higher), To::Next);
    tree(asm, low);
    asm.place(higher);
    tree(asm, high);
}

/// Jumps to `EPERM` when the arguments meet `check`, else to allow.
fn emit(asm: &mut Assembler, check: &Check) {
    let (allow, eperm) = (To::Label(ALLOW), To::Label(EPERM));
    match check {
        Check::AnyBit { arg, bits } => {
            asm.load_arg(*arg);
            asm.jump(libc::BPF_JSET, *bits, eperm, allow);
        }
        Check::CreatingSetId { flags, mode } => {
            asm.load_arg(*mode);
            asm.jump(libc::BPF_JSET, SET_ID, To::Next, allow);
            asm.load_arg(*flags);
            asm.jump(libc::BPF_JSET, libc::O_CREAT as u32, eperm, To::Next);
            // O_TMPFILE is two bits (with O_DIRECTORY): both set.
            let tmpfile = libc::O_TMPFILE as u32;
            asm.and(tmpfile);
            asm.jump(libc::BPF_JEQ, tmpfile, eperm, allow);
        }
        Check::NoneOf(allowed) => {
            asm.load_arg(0);
            asm.cases(allowed.iter().map(|&value| (value, allow)), eperm);
        }
    }
}

/// The `AUDIT_ARCH_*` value of the architecture cordon was built for, if it has a filter.
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_003E);
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: Option<u32> = Some(0xC000_00B7);
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const AUDIT_ARCH: Option<u32> = None;

#[cfg(test)]
mod tests {
    use super::*;

    /// What the kernel would make of `program` for a call (a small classic-BPF machine, of
    /// the instructions [`assemble`] uses).
    fn run(program: &BpfProgram, arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| match offset {
            0 => nr,
            4 => arch,
            _ => {
                let arg = args[(offset as usize - 16) / 8];
                match (offset - 16) % 8 {
                    0 => arg as u32,
                    _ => (arg >> 32) as u32,
                }
            }
        };
        let (mut pc, mut a) = (0, 0u32);
        loop {
            let op = &program[pc];
            let code = u32::from(op.code);
            pc += 1;
            let taken = match code & !libc::BPF_K {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    a = word(op.k);
                    continue;
                }
                c if c == libc::BPF_ALU | libc::BPF_AND => {
                    a &= op.k;
                    continue;
                }
                c if c == libc::BPF_RET => return op.k,
                c if c == libc::BPF_JMP | libc::BPF_JEQ => a == op.k,
                c if c == libc::BPF_JMP | libc::BPF_JGE => a >= op.k,
                c if c == libc::BPF_JMP | libc::BPF_JSET => a & op.k != 0,
                _ => panic!("an instruction the filter does not use: {op:?}"),
            };
            pc += usize::from(if taken { op.jt } else { op.jf });
        }
    }

    /// What the filter must answer, written out from the lists.
    fn expected(network: &Network, allow_unix: bool, arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let (allow, eperm) = (
            libc::SECCOMP_RET_ALLOW,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        );
        let enosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let low = |arg: u8| args[usize::from(arg)] as u32;
        let has = |arg: u8, bits: u32| low(arg) & bits == bits;
        let is = |calls: &[i64]| calls.iter().any(|&c| c as u32 == nr);
        if arch != AUDIT_ARCH.unwrap() {
            return libc::SECCOMP_RET_KILL_PROCESS;
        }
        if cfg!(target_arch = "x86_64") && nr & 0x4000_0000 != 0 || is(UNIMPLEMENTED) {
            return enosys;
        }
        if is(DENIED) {
            return eperm;
        }
        if nr == libc::SYS_clone as u32 {
            let creates = NAMESPACE_FLAGS.iter().any(|&f| has(0, f as u32));
            return if creates { eperm } else { allow };
        }
        for &(call, mode, creating) in MODE_SETTERS.iter().chain(&LEGACY_MODE_SETTERS) {
            if call as u32 != nr {
                continue;
            }
            let set_id = has(mode, libc::S_ISUID) || has(mode, libc::S_ISGID);
            let creates = !creating
                || has(mode - 1, libc::O_CREAT as u32)
                || has(mode - 1, libc::O_TMPFILE as u32);
            return if set_id && creates { eperm } else { allow };
        }
        if nr == libc::SYS_socket as u32 {
            let mut families = match network {
                Network::Off | Network::Allow(_) => vec![libc::AF_INET, libc::AF_INET6],
                Network::Open => return allow,
            };
            if allow_unix {
                families.push(libc::AF_UNIX);
            }
            return match families.iter().any(|&f| low(0) == f as u32) {
                true => allow,
                false => eperm,
            };
        }
        allow
    }

    #[test]
    fn the_program_answers_every_call_as_its_rules_say() {
        let values: Vec<u64> = [
            0,
            libc::O_CREAT as u64,
            libc::O_TMPFILE as u64,
            libc::O_DIRECTORY as u64,
            (libc::O_CREAT | libc::O_WRONLY) as u64,
            libc::S_ISUID as u64,
            libc::S_ISGID as u64,
            0o755,
            libc::CLONE_NEWUSER as u64,
            (libc::CLONE_VM | libc::SIGCHLD) as u64,
            libc::AF_UNIX as u64,
            libc::AF_INET as u64,
            libc::AF_INET6 as u64,
            libc::AF_NETLINK as u64,
            // Only the low 32 bits count.
            (1 << 32) | libc::AF_INET as u64,
            (libc::S_ISUID as u64) << 32,
            u32::MAX as u64,
        ]
        .into();
        let argued: Vec<u32> = (rules(&Network::Open, false).into_iter())
            .chain(rules(&Network::Off, false))
            .filter(|(_, rule)| matches!(rule, Rule::When(_)))
            .map(|(nr, _)| nr)
            .chain([libc::SYS_socket as u32])
            .collect();
        let networks = [
            Network::Off,
            Network::Allow(Default::default()),
            Network::Open,
        ];
        for network in &networks {
            for allow_unix in [false, true] {
                let program = program(network, allow_unix).unwrap();
                let arch = AUDIT_ARCH.unwrap();
                let same = |arch: u32, nr: u32, args: [u64; 6]| {
                    assert_eq!(
                        run(&program, arch, nr, args),
                        expected(network, allow_unix, arch, nr, args),
                        "{network:?}, Unix sockets {allow_unix}: call {nr:#x} with {args:?}"
                    );
                };
                for nr in (0..1024).chain((0..1024).map(|nr| nr | 0x4000_0000)) {
                    same(arch, nr, [0; 6]);
                    same(0x4000_0003, nr, [0; 6]);
                    if !argued.contains(&nr) {
                        continue;
                    }
                    // Each pair of the first four arguments (a mode and its flags among them).
                    for (i, j) in [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)] {
                        for &first in &values {
                            for &second in &values {
                                let mut args = [0; 6];
                                (args[i], args[j]) = (first, second);
                                same(arch, nr, args);
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_program_is_short() {
        let program = program(&Network::Off, true).unwrap();
        assert!(program.len() < 140, "{} instructions", program.len());
    }
}
