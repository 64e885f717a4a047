// Space on the GPU written from the host once per submit: a list of fixed-size chunks,
// each a GPU buffer with a CPU image. Between submits `take` hands out consecutive
// ranges (a kernel's parameters, an upload's bytes) filled on the CPU; at the submit
// `writeAll` copies the used part of each image with queue.writeBuffer, which the queue
// runs before the commands submitted after it, and the ranges start over.

interface Chunk {
  gpu: GPUBuffer;
  cpu: ArrayBuffer;
  /** The CPU image as u32s, which `write` copies into without making a view per call. */
  words: Uint32Array;
}

export class Arena {
  private chunks: Chunk[] = [];
  private chunk = 0;
  private offset = 0;

  constructor(
    private readonly device: GPUDevice,
    readonly chunkBytes: number,
    private readonly usage: GPUBufferUsageFlags,
    private readonly label: string,
  ) {}

  /** `bytes` (at most chunkBytes) of space: the GPU buffer and offset, and the CPU bytes to fill. */
  take(bytes: number): { buffer: GPUBuffer; offset: number; cpu: Uint8Array } {
    const c = this.reserve(bytes);
    return { buffer: c.gpu, offset: this.offset - bytes, cpu: new Uint8Array(c.cpu, this.offset - bytes, bytes) };
  }

  /**
   * `bytes` (a multiple of 4, at least data's) of space holding `data` from its start:
   * a kernel's parameters, taken for every dispatch, so no view is made for them.
   */
  write(data: Uint32Array, bytes: number): { buffer: GPUBuffer; offset: number } {
    const c = this.reserve(bytes);
    const offset = this.offset - bytes;
    c.words.set(data, offset / 4);
    return { buffer: c.gpu, offset };
  }

  /** The chunk with `bytes` free at the current offset, which moves past them. */
  private reserve(bytes: number): Chunk {
    if (this.offset + bytes > this.chunkBytes) {
      this.chunk++;
      this.offset = 0;
    }
    let c = this.chunks[this.chunk];
    if (!c) {
      const cpu = new ArrayBuffer(this.chunkBytes);
      c = { gpu: this.device.createBuffer({ size: this.chunkBytes, usage: this.usage | GPUBufferUsage.COPY_DST, label: this.label }), cpu, words: new Uint32Array(cpu) };
      this.chunks.push(c);
    }
    this.offset += bytes;
    return c;
  }

  /** Writes what was taken since the last call to the GPU and starts over. */
  writeAll(): void {
    for (let i = 0; i <= this.chunk && i < this.chunks.length; i++) {
      const used = i < this.chunk ? this.chunkBytes : this.offset;
      if (used > 0) this.device.queue.writeBuffer(this.chunks[i].gpu, 0, this.chunks[i].cpu, 0, used);
    }
    this.chunk = 0;
    this.offset = 0;
  }
}
