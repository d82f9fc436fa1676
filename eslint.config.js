import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// The dependency directions of DESIGN.md ("Layout"): cli -> api/conductor/exporter -> db,
// drivers, common; drivers depend only on drivers/ and common; api reads the drivers' registry
// and interfaces, never an implementation; common depends on nothing of ours.
const LAYERS = {
  common: ['api', 'conductor', 'db', 'drivers', 'exporter', 'sim', 'cli'],
  db: ['api', 'conductor', 'drivers', 'exporter', 'sim', 'cli'],
  drivers: ['api', 'conductor', 'db', 'exporter', 'sim', 'cli'],
  exporter: ['api', 'conductor', 'db', 'drivers', 'sim', 'cli'],
  sim: ['api', 'conductor', 'db', 'drivers', 'exporter', 'cli'],
  api: ['conductor', 'exporter', 'sim', 'cli', 'drivers/fake', 'drivers/ipmi', 'drivers/redfish'],
  conductor: ['api', 'exporter', 'sim', 'cli'],
};

// All SQL lives in db/: elsewhere knex and pg are types only, and no query is built.
const SQL_IMPORTS = ['knex', 'pg'].map((name) => ({ name, allowTypeImports: true, message: 'SQL lives in db/: import a function from there.' }));
const SQL_SYNTAX = [
  { selector: "CallExpression[callee.name=/^(db|trx|knex)$/]", message: 'A query outside db/: SQL lives in db/.' },
  { selector: "CallExpression[callee.type='MemberExpression'][callee.property.name=/^(db|knex)$/]", message: 'A query outside db/: SQL lives in db/.' },
  { selector: "MemberExpression[property.name='raw'][object.name=/^(db|trx|knex)$/]", message: 'Raw SQL outside db/: SQL lives in db/.' },
  { selector: "MemberExpression[property.name='raw'][object.property.name=/^(db|knex)$/]", message: 'Raw SQL outside db/: SQL lives in db/.' },
];

function importRules(dir, sql) {
  const patterns = LAYERS[dir].map((target) => ({
    group: [`../${target}/*`, `../../${target}/*`, `../../../${target}/*`],
    message: `${dir}/ may not import ${target}/ (DESIGN.md, Layout).`,
  }));
  return { '@typescript-eslint/no-restricted-imports': ['error', { paths: sql ? SQL_IMPORTS : [], patterns }] };
}

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'var/**', 'bench/results/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['**/*.ts'],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    // knex's where((q) => q.where(...)) callbacks return the builder, which knex ignores: not a
    // promise anyone forgot, though a builder is thenable.
    files: ['db/**/*.ts'],
    rules: { '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false } }] },
  },
  ...Object.keys(LAYERS).flatMap((dir) => [
    { files: [`${dir}/**/*.ts`], rules: importRules(dir, dir !== 'db') },
    ...(dir === 'db' ? [] : [{ files: [`${dir}/**/*.ts`], rules: { 'no-restricted-syntax': ['error', ...SQL_SYNTAX] } }]),
  ]),
  { files: ['cli/**/*.ts'], rules: { 'no-restricted-syntax': ['error', ...SQL_SYNTAX] } },
  { files: ['cli/**/*.ts'], rules: { '@typescript-eslint/no-restricted-imports': ['error', { paths: SQL_IMPORTS }] } },
);
