// What Dawn and Mesa print on stderr while an adapter is found, sorted into what a user
// should see and what is known to be harmless. Dawn writes a message as
//   Warning: <text>
//    - While <context>            (zero or more)
//       at <function> (<source path on the package's build machine>:<line>)
// followed by a blank line after a location; a dropped message goes with all of it.

export interface HarmlessMessage {
  /** Matches the message's first line. */
  pattern: RegExp;
  /** Why it needs no action (kept here so the list can be reviewed). */
  why: string;
}

export const HARMLESS_DRIVER_MESSAGES: readonly HarmlessMessage[] = [
  {
    pattern: /^Warning: Couldn't load Vulkan: /,
    why: 'no Vulkan loader on this machine: Dawn tries its other backends, and an adapter is found or the error says what was tried',
  },
  {
    pattern: /^Warning: Vulkan shaderUniform\*ArrayDynamicIndexing required\.$/,
    why: "a Vulkan driver Dawn cannot use (older Mesa lavapipe); Dawn skips it and the software GPU is used through OpenGL",
  },
  {
    pattern: /^Warning: maxDynamic(Uniform|Storage)BuffersPerPipelineLayout artificially reduced from \d+ to \d+ to fit dynamic offset allocation limit\.$/,
    why: 'limits of the OpenGL backend on dynamic-offset bindings, which no kernel here uses',
  },
  {
    pattern: /^error: XDG_RUNTIME_DIR is invalid or not set in the environment\.$/,
    why: "libwayland, called by Mesa's Vulkan device-select layer looking for a display a compute job does not need",
  },
];

/**
 * What to do when Dawn found no adapter on `backend`, read from what the drivers said
 * while it looked: asked for Vulkan, a driver Dawn refuses or no Vulkan loader at all;
 * otherwise Mesa's packages for the software GPU.
 */
export function noAdapterAdvice(backend: string, driverText: string): string {
  if (backend === 'vulkan' && /^Warning: Vulkan shaderUniform\*ArrayDynamicIndexing required\.$/m.test(driverText)) {
    return 'Dawn found a Vulkan driver it cannot use: the driver lacks shaderUniform*ArrayDynamicIndexing, as the lavapipe of Mesa 22.3 ' +
      "(Debian 12's mesa-vulkan-drivers) does, so Vulkan has no adapter here however Mesa is installed. Leave the backend to auto " +
      "(no --backend, WEBGPU_BACKEND unset), which takes Mesa's llvmpipe through OpenGL, or use a newer Mesa's lavapipe.";
  }
  if (backend === 'vulkan' && /^Warning: Couldn't load Vulkan: /m.test(driverText)) {
    return 'There is no Vulkan loader (libvulkan.so.1): install libvulkan1 and a Vulkan driver (mesa-vulkan-drivers for the CPU), ' +
      "or leave the backend to auto, which takes Mesa's llvmpipe through OpenGL (libegl1 libegl-mesa0 libgl1-mesa-dri).";
  }
  return 'On a machine without a GPU install Mesa (mesa-vulkan-drivers libegl1 libegl-mesa0 libgl1-mesa-dri) and set EGL_PLATFORM=surfaceless.';
}

const CONTINUATION = /^\s+(- |at )/;

/** Splits captured driver output into the messages to show and the harmless ones. */
export function filterDriverLog(text: string, harmless: readonly HarmlessMessage[] = HARMLESS_DRIVER_MESSAGES): { kept: string; dropped: string } {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const kept: string[] = [];
  const dropped: string[] = [];
  for (let i = 0; i < lines.length; ) {
    const start = i++;
    while (i < lines.length && CONTINUATION.test(lines[i])) i++;
    if (i > start + 1 && lines[i] === '') i++;
    (harmless.some((h) => h.pattern.test(lines[start])) ? dropped : kept).push(...lines.slice(start, i));
  }
  const join = (ls: string[]) => (ls.length ? ls.join('\n') + '\n' : '');
  return { kept: join(kept), dropped: join(dropped) };
}
