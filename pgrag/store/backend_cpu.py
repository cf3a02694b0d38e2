"""What services see of the backends' CPU meter (db/backend_cpu.py): a call's guard meters
the database work its connections do, to charge the call its own cost."""

from pgrag.db.backend_cpu import CallCpu, metering

__all__ = ["CallCpu", "metering"]
