import { Module } from '@nestjs/common';
import { RunFilesController } from './run-files.controller';

/** The run file's JSON Schema, published for the CLI (the format itself is the CLI's: it builds the API request). */
@Module({ controllers: [RunFilesController] })
export class RunFilesModule {}
