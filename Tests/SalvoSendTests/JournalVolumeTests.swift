import SalvoRows
import SalvoTestTraits
import Testing

/// A journal on an NFS mount whose locks never reach the server (`nolock`, `local_lock=`) is refused: the lock
/// call succeeds there, so the mount's options are what tells.
@Suite(.tags(.pure), .runs(.pure)) struct JournalVolumeTests {
    static let mounts = """
        22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
        40 22 0:45 / /var/lib/salvo rw,relatime shared:20 - nfs4 server:/export rw,vers=4.2,local_lock=none,addr=10.0.0.2
        41 22 0:46 / /mnt/jobs rw,relatime shared:21 - nfs server:/jobs rw,vers=3,nolock,addr=10.0.0.2
        42 41 0:47 / /mnt/jobs/ok rw,relatime shared:22 - nfs server:/ok rw,vers=3,addr=10.0.0.2
        43 22 0:48 / /mnt/local rw,relatime shared:23 - nfs4 server:/l rw,vers=4.1,local_lock=all
        44 22 0:49 / /mnt/with\\040space rw - nfs server:/s rw,nolock
        45 41 0:50 / /mnt/jobs/disk rw - ext4 /dev/vdb rw
        """

    @Test(
        arguments: [
            ("/var/lib/salvo/job1", nil),
            ("/srv/job", nil),
            ("/mnt/jobs/job1", "/mnt/jobs"),
            ("/mnt/jobs/ok/job1", nil),
            ("/mnt/local/a/b", "/mnt/local"),
            ("/mnt/with space/j", "/mnt/with space"),
            ("/mnt/jobsother/j", nil),
            ("/mnt/jobs/disk/j", nil),
        ] as [(String, String?)]
    )
    func localOnlyLocksAreNamed(path: String, refusedMount: String?) {
        let problem = JournalLock.localLockProblem(mountInfo: Self.mounts, path: path)
        if let refusedMount {
            #expect(problem?.contains("the NFS mount \(refusedMount) has") == true, "\(problem ?? "nil")")
        } else {
            #expect(problem == nil)
        }
    }
}
