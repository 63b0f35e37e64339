import time
def main():
    i = 0
    acc = 0.0
    while i != 10000000:
        acc = acc + 0.5 * float(i)
        i = i + 1
    return acc
t = time.perf_counter()
r = main()
print(time.perf_counter() - t, repr(r))
