//! Memory a thread keeps between differentiations, so that repeated gradients (an
//! optimisation loop, or an inner gradient taken at every step of an outer one) do
//! not pay for `malloc`, `free` and fresh pages on every call.
//!
//! The differentiation operators need scratch vectors of many element types: trace
//! entries, adjoints and input variables of every nesting level (`Entry<f64>`,
//! `Reverse<'t, f64>`, `Entry<Reverse<'t, f64>>`, `Dual<Reverse<'t, f64>>`, …).
//! Most of those types carry a lifetime, so they cannot be told apart by `TypeId` or
//! kept in a typed thread-local. The pool therefore keeps *empty* allocations and
//! tells them apart by the layout of their element type: a vector given back as a
//! `Vec<T>` can be taken again as a `Vec<U>` for any `U` with the size and alignment
//! of `T`, which is exactly what [`Vec::from_raw_parts`] allows. No value is ever
//! kept, only capacity.
//!
//! Only buffers of at least [`MIN_BUFFER_BYTES`] are pooled: below that the
//! allocator's own caches are as fast as the pool, and the vectors of a small
//! nested gradient (two input variables, say) are better left to them. At most
//! [`KEPT_PER_LAYOUT`] buffers of one element layout are kept, none larger than
//! [`MAX_BUFFER_BYTES`], and no more than [`MAX_POOL_BYTES`] in all, so a one-off huge
//! gradient does not pin its memory.

use std::alloc::Layout;
use std::cell::RefCell;
use std::mem::{ManuallyDrop, size_of};
use std::ptr::NonNull;

/// The smallest buffer worth pooling.
const MIN_BUFFER_BYTES: usize = 4096;
/// Buffers kept for each element layout: enough for a trace and an adjoint array
/// that happen to share a layout, at each of a few nesting levels.
const KEPT_PER_LAYOUT: usize = 4;
/// The largest buffer kept.
const MAX_BUFFER_BYTES: usize = 256 << 20;
/// The most memory kept in all, per thread.
const MAX_POOL_BYTES: usize = 512 << 20;

/// An empty allocation given back by a `Vec` whose element type had layout `element`.
struct Spare {
    element: Layout,
    ptr: NonNull<u8>,
    capacity: usize,
    /// Frees the allocation as the vector type that gave it back would have.
    release: unsafe fn(NonNull<u8>, usize),
}

impl Spare {
    fn bytes(&self) -> usize {
        self.element.size() * self.capacity
    }
}

impl Drop for Spare {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: `release` is `release::<T>` for the `T` whose `Vec` owned this
        // allocation with this capacity (see `give`), and the allocation is dropped
        // only here, once.
        unsafe {
            (self.release)(self.ptr, self.capacity);
        }
    }
}

/// Rebuilds and drops an empty `Vec<T>`: the documented way to free what
/// [`Vec::as_mut_ptr`] and [`Vec::capacity`] describe.
///
/// # Safety
/// `ptr` and `capacity` must describe an allocation a `Vec<T>` (or a `Vec` of an
/// element type with `T`'s size and alignment) gave up, not freed since.
#[allow(unsafe_code)]
unsafe fn release<T>(ptr: NonNull<u8>, capacity: usize) {
    // SAFETY: by the function's contract.
    drop(unsafe { Vec::<T>::from_raw_parts(ptr.as_ptr().cast::<T>(), 0, capacity) });
}

/// The kept buffers, most recently given last, and their total size.
struct Pool {
    spares: Vec<Spare>,
    bytes: usize,
}

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool {
            spares: Vec::new(),
            bytes: 0,
        })
    };
}

/// Whether a buffer of `capacity` elements of type `T` is worth pooling.
#[inline(always)]
fn poolable<T>(capacity: usize) -> bool {
    (MIN_BUFFER_BYTES..=MAX_BUFFER_BYTES).contains(&capacity.saturating_mul(size_of::<T>()))
}

/// An empty vector with room for at least `capacity` elements: the buffer most
/// recently given back for `T`'s layout (its memory is the likeliest to be in cache),
/// or a new allocation if there is none or `capacity` is too small to pool.
#[inline(always)]
pub(crate) fn take<T>(capacity: usize) -> Vec<T> {
    if poolable::<T>(capacity) {
        take_pooled(capacity)
    } else {
        Vec::with_capacity(capacity)
    }
}

#[inline(never)]
fn take_pooled<T>(capacity: usize) -> Vec<T> {
    let element = Layout::new::<T>();
    let spare = POOL
        .try_with(|pool| {
            let mut pool = pool.borrow_mut();
            let i = pool.spares.iter().rposition(|s| s.element == element)?;
            let spare = pool.spares.remove(i);
            pool.bytes -= spare.bytes();
            Some(spare)
        })
        .ok()
        .flatten();
    let Some(spare) = spare else {
        return Vec::with_capacity(capacity);
    };
    let spare = ManuallyDrop::new(spare);
    #[allow(unsafe_code)]
    // SAFETY: the allocation was given up by a `Vec` of an element type with exactly
    // `T`'s size and alignment and this capacity (`keep` recorded both), so `T` has
    // the alignment it was allocated with and `size_of::<T>() · capacity` is its
    // size; it holds no values (length 0); and the `ManuallyDrop` hands its ownership
    // over to the new vector.
    let mut buffer =
        unsafe { Vec::from_raw_parts(spare.ptr.as_ptr().cast::<T>(), 0, spare.capacity) };
    buffer.reserve(capacity);
    buffer
}

/// Gives `buffer`'s memory to the pool (its elements are dropped first), unless it
/// is too small or too big to pool or the pool is full.
#[inline(always)]
pub(crate) fn give<T>(buffer: Vec<T>) {
    if poolable::<T>(buffer.capacity()) {
        // On thread exit the pool may already be gone; then the buffer is freed.
        let _ = POOL.try_with(move |pool| pool.borrow_mut().keep(buffer));
    }
}

/// Inputs held on the stack by [`with_scratch`]: the two or three variables of an
/// inner gradient taken at every step of an outer computation, which would
/// otherwise cost an allocation and a free per gradient.
const STACK_SCRATCH: usize = 4;

/// `f` of the `len` values of `items`, gathered in a scratch slice that `f` may
/// overwrite: on the stack for up to [`STACK_SCRATCH`] values, in pooled memory
/// otherwise. For the input vector an operator builds around each call of the
/// function it differentiates.
#[inline(always)]
pub(crate) fn with_scratch<T: Copy, U>(
    len: usize,
    items: impl IntoIterator<Item = T>,
    f: impl FnOnce(&mut [T]) -> U,
) -> U {
    let mut items = items.into_iter();
    if len <= STACK_SCRATCH {
        let Some(first) = items.next() else {
            return f(&mut []);
        };
        let mut scratch = [first; STACK_SCRATCH];
        scratch[1..len]
            .iter_mut()
            .zip(items)
            .for_each(|(slot, item)| *slot = item);
        f(&mut scratch[..len])
    } else {
        let mut scratch = take(len);
        scratch.extend(items);
        let result = f(&mut scratch);
        give(scratch);
        result
    }
}

/// The first `len` elements of `buffer` as a vector to hand out: `buffer` itself
/// if it is too small to pool (its spare capacity is then a few bytes), otherwise a
/// copy, and `buffer` goes back to the pool.
pub(crate) fn into_prefix<T: Copy>(mut buffer: Vec<T>, len: usize) -> Vec<T> {
    if poolable::<T>(buffer.capacity()) {
        let prefix = buffer[..len].to_vec();
        give(buffer);
        prefix
    } else {
        buffer.truncate(len);
        buffer
    }
}

impl Pool {
    #[inline(never)]
    fn keep<T>(&mut self, mut buffer: Vec<T>) {
        let element = Layout::new::<T>();
        let bytes = buffer.capacity() * size_of::<T>();
        // A layout that has its share keeps its largest buffers.
        let (count, smallest) = self
            .spares
            .iter()
            .enumerate()
            .filter(|(_, s)| s.element == element)
            .fold((0, None::<(usize, usize)>), |(count, smallest), (i, s)| {
                let smaller = smallest.is_none_or(|(_, capacity)| s.capacity < capacity);
                (
                    count + 1,
                    if smaller {
                        Some((i, s.capacity))
                    } else {
                        smallest
                    },
                )
            });
        if count >= KEPT_PER_LAYOUT {
            match smallest {
                Some((i, capacity)) if capacity < buffer.capacity() => {
                    let evicted = self.spares.remove(i);
                    self.bytes -= evicted.bytes();
                }
                _ => return,
            }
        }
        if self.bytes + bytes > MAX_POOL_BYTES {
            return;
        }
        buffer.clear();
        let mut buffer = ManuallyDrop::new(buffer);
        self.spares.push(Spare {
            element,
            // A vector of a non-zero-sized type with non-zero capacity owns a real
            // allocation (and `poolable` rules out both zeros).
            ptr: NonNull::new(buffer.as_mut_ptr().cast::<u8>()).expect("allocated"),
            capacity: buffer.capacity(),
            release: release::<T>,
        });
        self.bytes += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool's buffers for one element layout, as (address, capacity).
    fn kept(element: Layout) -> Vec<(usize, usize)> {
        POOL.with(|pool| {
            let pool = pool.borrow();
            pool.spares
                .iter()
                .filter(|s| s.element == element)
                .map(|s| (s.ptr.as_ptr() as usize, s.capacity))
                .collect()
        })
    }

    #[test]
    fn a_buffer_is_reused_by_any_type_of_its_layout() {
        // [u64; 4] and (f64, f64, f64, f64) share size and alignment.
        let mut first: Vec<[u64; 4]> = take(1000);
        first.push([1, 2, 3, 4]);
        let (address, capacity) = (first.as_ptr() as usize, first.capacity());
        give(first);
        assert_eq!(kept(Layout::new::<[u64; 4]>()), vec![(address, capacity)]);
        let second: Vec<(f64, f64, f64, f64)> = take(500);
        assert_eq!(
            (second.as_ptr() as usize, second.capacity()),
            (address, capacity)
        );
        assert!(second.is_empty());
        assert!(kept(Layout::new::<[u64; 4]>()).is_empty());
        // A request larger than the buffer grows it.
        let mut third: Vec<(f64, f64, f64, f64)> = second;
        third.extend(std::iter::repeat_n((0.5, 1.5, 2.5, 3.5), 5000));
        assert_eq!(third[4999], (0.5, 1.5, 2.5, 3.5));
        give(third);
        let fourth: Vec<[u64; 4]> = take(6000);
        assert!(fourth.capacity() >= 6000);
        give(fourth);
    }

    #[test]
    fn other_layouts_do_not_share() {
        let a: Vec<[u8; 24]> = take(1000); // size 24, alignment 1
        give(a);
        let b: Vec<[u64; 3]> = take(1000); // size 24, alignment 8: a fresh buffer
        assert_eq!(kept(Layout::new::<[u8; 24]>()).len(), 1);
        give(b);
        assert_eq!(kept(Layout::new::<[u64; 3]>()).len(), 1);
    }

    #[test]
    fn small_and_huge_buffers_are_not_kept() {
        let small: Vec<[u64; 5]> = take(4);
        give(small);
        assert!(kept(Layout::new::<[u64; 5]>()).is_empty());
        // A small request is the allocator's even when the pool has a buffer.
        give(Vec::<[u64; 5]>::with_capacity(1000));
        assert_eq!(take::<[u64; 5]>(4).capacity(), 4);
        assert_eq!(kept(Layout::new::<[u64; 5]>()).len(), 1);
        let _ = take::<[u64; 5]>(1000);
        // Capacity alone decides; the huge buffer is never touched, so never faulted in.
        let huge: Vec<[u64; 5]> = Vec::with_capacity(MAX_BUFFER_BYTES / 40 + 1);
        give(huge);
        assert!(kept(Layout::new::<[u64; 5]>()).is_empty());
    }

    #[test]
    fn a_layout_keeps_its_largest_buffers() {
        type T = [u64; 7];
        let buffers: Vec<Vec<T>> = (1..=KEPT_PER_LAYOUT + 2)
            .map(|i| Vec::with_capacity(i * 100))
            .collect();
        for b in buffers {
            give(b);
        }
        let mut capacities: Vec<usize> = kept(Layout::new::<T>()).iter().map(|k| k.1).collect();
        capacities.sort_unstable();
        let expected: Vec<usize> = (3..=KEPT_PER_LAYOUT + 2).map(|i| i * 100).collect();
        assert_eq!(capacities, expected);
        // Taking returns the most recently kept one.
        let last: Vec<T> = take(100);
        assert_eq!(last.capacity(), (KEPT_PER_LAYOUT + 2) * 100);
    }

    #[test]
    fn with_scratch_gives_the_items_on_the_stack_or_pooled() {
        for len in [0, 1, STACK_SCRATCH, STACK_SCRATCH + 1, 1000] {
            let items = (0..len).map(|i| [i as u64; 9]);
            let sum = with_scratch(len, items, |scratch| {
                assert_eq!(scratch.len(), len);
                assert!(scratch.iter().enumerate().all(|(i, s)| *s == [i as u64; 9]));
                scratch.iter_mut().for_each(|s| s[0] += 1);
                scratch.iter().map(|s| s[0]).sum::<u64>()
            });
            assert_eq!(sum, (1..=len as u64).sum());
        }
        // The large scratch went back to the pool.
        assert_eq!(kept(Layout::new::<[u64; 9]>()).len(), 1);
    }

    #[test]
    fn into_prefix_hands_out_small_buffers_and_keeps_large_ones() {
        let mut small: Vec<[u64; 6]> = Vec::with_capacity(10);
        small.extend([[1; 6], [2; 6], [3; 6]]);
        let address = small.as_ptr() as usize;
        let prefix = into_prefix(small, 2);
        assert_eq!(prefix, vec![[1; 6], [2; 6]]);
        assert_eq!(prefix.as_ptr() as usize, address);

        let mut large: Vec<[u64; 6]> = Vec::with_capacity(1000);
        large.extend((0..1000).map(|i| [i; 6]));
        let address = large.as_ptr() as usize;
        let prefix = into_prefix(large, 3);
        assert_eq!(prefix, vec![[0; 6], [1; 6], [2; 6]]);
        assert_eq!(prefix.capacity(), 3);
        assert_eq!(kept(Layout::new::<[u64; 6]>()), vec![(address, 1000)]);
    }
}
