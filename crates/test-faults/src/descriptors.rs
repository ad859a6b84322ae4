//! Running a process out of file descriptors, for tests of what a daemon does at EMFILE: the
//! soft `RLIMIT_NOFILE` lowered so that exactly one descriptor is left, and the CPU time of one
//! of the process's threads, read from a `/proc` file opened beforehand (nothing can be opened
//! while the limit is low).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::time::Duration;

/// The process's descriptor limit, lowered until dropped.
pub struct LastDescriptor {
    soft_before: u64,
    /// Keep every number below the free one in use (the limit bounds the numbers, not the count).
    _fillers: Vec<File>,
}

impl LastDescriptor {
    /// Lowers the soft limit so that one descriptor number is free: the next file or socket
    /// this process opens takes it, and the one after fails with EMFILE.
    pub fn leave_one() -> LastDescriptor {
        let highest = std::fs::read_dir("/proc/self/fd")
            .expect("listing /proc/self/fd")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
            .max()
            .expect("an open descriptor");
        let mut fillers = Vec::new();
        let free = loop {
            let f = File::open("/dev/null").expect("opening /dev/null");
            if f.as_raw_fd() as u64 > highest {
                // Every number up to `highest` is in use now; this one's is the free one.
                break f.as_raw_fd() as u64;
            }
            fillers.push(f);
        };
        let soft_before = nofile().rlim_cur;
        set_soft(free + 1);
        LastDescriptor { soft_before, _fillers: fillers }
    }
}

impl Drop for LastDescriptor {
    fn drop(&mut self) {
        set_soft(self.soft_before);
    }
}

fn nofile() -> libc::rlimit {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) }, 0);
    l
}

fn set_soft(soft: u64) {
    let l = libc::rlimit { rlim_cur: soft, rlim_max: nofile().rlim_max };
    // SAFETY: a valid rlimit within the hard limit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) }, 0, "{}", std::io::Error::last_os_error());
}

/// The CPU time of one thread of this process, readable while descriptors are short.
pub struct ThreadCpu(File);

impl ThreadCpu {
    /// The thread whose name starts with `prefix`, waiting up to 5 s for it (a new thread
    /// names itself once it runs).
    pub fn of(prefix: &str) -> ThreadCpu {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            for task in std::fs::read_dir("/proc/self/task").expect("listing /proc/self/task").flatten() {
                let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                if name.trim_end().starts_with(prefix) {
                    return ThreadCpu(File::open(task.path().join("stat")).expect("opening the thread's stat"));
                }
            }
            assert!(std::time::Instant::now() < deadline, "no thread named {prefix}* within 5 s");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// User plus system time so far.
    pub fn used(&self) -> Duration {
        let mut buf = vec![0u8; 4096];
        let n = self.0.read_at(&mut buf, 0).expect("reading the thread's stat");
        let text = String::from_utf8_lossy(&buf[..n]);
        let fields: Vec<&str> = text[text.rfind(')').expect("a stat line") + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf has no preconditions.
        let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        Duration::from_secs_f64(ticks as f64 / per_sec)
    }
}
