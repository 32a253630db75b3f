"""The shop's driver: every remote of ``shop`` once, then a failure nobody catches."""

from __future__ import annotations

import os
import sys

import ray
from shop.books import Ledger, close_books, summarize
from shop.catalog import Inventory, parse
from shop.orders import Checkout, broken, receipts, total

ray.init(address=os.environ.get("SHOP_RAY_ADDRESS") or None, log_to_driver=False)
job_file = os.environ.get("SHOP_JOB_FILE")
if job_file:
    with open(job_file, "w") as out:
        out.write(ray.get_runtime_context().get_job_id())

items = ray.get([parse.remote(line) for line in ["apple:3", "fig:2", "kiwi:5"]])
print("items", items)
names = [name for name, _ in items]
print("total", ray.get(total.remote(names)))
print("total with options", ray.get(total.options(num_cpus=1).remote(names[:1])))
stock = Inventory.remote(10)
print("stock", ray.get([stock.take.remote(count) for _, count in items]))
try:
    ray.get(stock.take.remote(100))
except ValueError as error:
    print("inventory said", str(error).splitlines()[-1])
checkout = Checkout.remote()  # held: Ray before 2.50 loses a handle nothing holds
print("checkout", ray.get(checkout.pay.remote(42)))
print("receipts", [ray.get(ref) for ref in receipts.remote(3)])
try:
    ray.get(broken.remote("order-7"))
except KeyError as error:
    print("broken", type(error).__name__)
ledger = Ledger.remote()
print("ledger", ray.get([ledger.record.remote(name) for name in names]))
print("summary", ray.get(summarize.remote([1, 2, 3])))
sys.stdout.flush()
ray.get(close_books.remote(sys.argv[1] if len(sys.argv) > 1 else "monday"))
