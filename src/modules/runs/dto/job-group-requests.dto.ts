import { Type } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, ValidateNested } from 'class-validator';
import { JobRequestDto } from '../../jobs/dto/job-spec';
import { MAX_JOBS_PER_REQUEST } from './submit-run.dto';

export class AddJobsDto {
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_JOBS_PER_REQUEST)
  @ValidateNested({ each: true })
  @Type(() => JobRequestDto)
  jobs!: JobRequestDto[];
}
