// The WGSL files of shaders/ (paths from there, text), which the page's build
// (src/cli/web.ts) bundles as this module so that the page carries its kernels.
declare module 'wgt:shaders' {
  const files: Readonly<Record<string, string>>;
  export default files;
}
