// A cache keyed by a sequence of parts (objects, strings, numbers), one Map lookup per
// part: the runtime looks up a kernel and a bind group at every dispatch, and building
// a string key for each, then hashing it, cost more host time than the lookups
// (runtime.ts). Parts compare as Map keys do (SameValueZero); the caller makes sure no
// two keys it means to tell apart give the same sequence.

export class KeyTrie<V> {
  private children: Map<unknown, KeyTrie<V>> | null = null;
  /** The value of the key that ends here. */
  value: V | undefined;

  /** The node one part further, made if missing. */
  at(part: unknown): KeyTrie<V> {
    this.children ??= new Map();
    let child = this.children.get(part);
    if (!child) this.children.set(part, (child = new KeyTrie<V>()));
    return child;
  }
}
