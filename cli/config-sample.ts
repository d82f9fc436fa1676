/** `galvanic config sample`: the sample file is generated from the schema, never edited by hand. */
import { writeFileSync } from 'node:fs';
import { renderSample } from '../common/config.js';

export { renderSample };

/** Writes the generated sample (normally to etc/galvanic.conf.sample). */
export function writeSample(path: string): void {
  writeFileSync(path, renderSample(), 'utf8');
}
