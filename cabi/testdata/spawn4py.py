"""spawn4py.py: mpi4py's spawn cases (after mpi4py 3.1.4's test_spawn.py,
written here): Comm.Spawn from COMM_WORLD (root 0) and from COMM_SELF,
Spawn_multiple, and Spawn with errcodes; each spawned child reaches its
parents (Get_parent), meets them in a barrier and disconnects. Prints
"rank R CASE ok" once done; an assertion fails the rank."""
import sys

from mpi4py import MPI

if len(sys.argv) > 1 and sys.argv[1] == 'child':
    parent = MPI.Comm.Get_parent()
    assert parent != MPI.COMM_NULL
    parent.Barrier()
    parent.Disconnect()
    sys.exit(0)

case = sys.argv[1]
world = MPI.COMM_WORLD
exe, args = sys.executable, [__file__, 'child']
if case == 'world':
    child = world.Spawn(exe, args=args, maxprocs=3, root=0)
    assert child.Get_remote_size() == 3
elif case == 'self':
    child = MPI.COMM_SELF.Spawn(exe, args=args, maxprocs=1)
    assert child.Get_remote_size() == 1
elif case == 'multiple':
    child = world.Spawn_multiple([exe, exe], [args, args], [1, 2], root=0)
    assert child.Get_remote_size() == 3
elif case == 'errcodes':
    errcodes = []
    child = world.Spawn(exe, args=args, maxprocs=2, root=0, errcodes=errcodes)
    assert errcodes == [MPI.SUCCESS] * 2, errcodes
else:
    raise SystemExit('unknown case ' + case)
child.Barrier()
child.Disconnect()
print("rank %d %s ok" % (world.rank, case), flush=True)
