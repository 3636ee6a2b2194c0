// examples/paidtools-ts over streamable HTTP, end to end (support/example-suite.ts).
import { exampleSuite } from './support/example-suite.js';

exampleSuite('http');
