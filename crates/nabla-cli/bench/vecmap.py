import time
def main():
    v = [float(i) for i in range(1000000)]
    return sum(map(lambda x: x * x + 1.0, v))
t = time.perf_counter()
r = main()
print(time.perf_counter() - t, repr(r))
