/** The name tfjs knows the native backend by (its own module: naming it needs neither tfjs nor the addon). */
export const NATIVE_BACKEND = 'native';
