"""Opens a principal's memory and keeps it open until killed (test_broken_store uses it)."""

import sys
import time
from pathlib import Path

from vicar.memory.embedder import default_embedder
from vicar.memory.principal import PrincipalMemory
from vicar.settings import MemoryParams

mem = PrincipalMemory(sys.argv[2], Path(sys.argv[1]), default_embedder(), MemoryParams())
print("open", flush=True)
while True:
    time.sleep(1)
